"""``metadata.managedFields`` as a v1.36 server writes them (FieldsV1): what each write's manager
owns, with ``".": {}`` for every map, list and list item the write brought into being. The
expected sets are what a real v1.36 kube-apiserver answered; these run on a real cluster too."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.conftest import Http


def cm_path(ns: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/configmaps" + (f"/{name}" if name else "")


def managed(obj: dict[str, Any]) -> dict[tuple[str, str | None], dict[str, Any]]:
    """Each entry's fieldsV1 by (manager, subresource)."""
    out = {}
    for entry in obj["metadata"]["managedFields"]:
        assert (entry["operation"], entry["fieldsType"]) == ("Update", "FieldsV1")
        out[(entry["manager"], entry.get("subresource"))] = entry["fieldsV1"]
    return out


async def test_a_create_owns_every_map_and_list_it_brings(http: Http, namespace: str) -> None:
    owner = (await http.post(cm_path(namespace), {"metadata": {"name": "owner"}})).body
    body = {
        "metadata": {
            "name": "m",
            "labels": {"a": "1"},
            "finalizers": ["example.com/hold"],
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
            ],
        },
        "data": {"k": "v"},
    }
    created = await http.post(cm_path(namespace), body, query={"fieldManager": "creator"})
    assert created.status == 201, created.body
    try:
        ref = f'k:{{"uid":"{owner["metadata"]["uid"]}"}}'
        assert managed(created.body) == {
            ("creator", None): {
                "f:data": {".": {}, "f:k": {}},
                "f:metadata": {
                    "f:finalizers": {".": {}, 'v:"example.com/hold"': {}},
                    "f:labels": {".": {}, "f:a": {}},
                    "f:ownerReferences": {".": {}, ref: {}},  # an OwnerReference is atomic
                },
            }
        }
        # Another manager adds to maps that exist (no "."), and brings a new one (annotations);
        # the creator keeps the data map itself, now without members: "f:data": {}.
        patched = await http.patch(
            cm_path(namespace, "m"),
            {"metadata": {"labels": {"b": "2"}, "annotations": {"n": "1"}}, "data": {"k": "w"}},
            query={"fieldManager": "labeler"},
        )
        assert patched.status == 200, patched.body
        fields = managed(patched.body)
        assert fields[("labeler", None)] == {
            "f:data": {"f:k": {}},
            "f:metadata": {"f:annotations": {".": {}, "f:n": {}}, "f:labels": {"f:b": {}}},
        }
        assert fields[("creator", None)]["f:data"] == {}
        assert fields[("creator", None)]["f:metadata"]["f:labels"] == {".": {}, "f:a": {}}
    finally:
        await http.patch(cm_path(namespace, "m"), {"metadata": {"finalizers": None}})


async def test_a_deployment_create_owns_what_its_zero_value_lacks(http: Http, namespace: str) -> None:
    """Maps the zero value of a Deployment already has (spec, spec.strategy, spec.template and
    its metadata and spec) get no "."; spec.selector is atomic; the server's defaults are the
    creator's too."""
    container = {
        "name": "c",
        "image": "busybox:1.36",
        "args": ["a"],
        "ports": [{"containerPort": 80}],
        "resources": {"limits": {"cpu": "1"}},
        "env": [{"name": "X", "value": "y"}],
    }
    deployment = {
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [container]}},
        },
    }
    created = await http.post(
        f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment, query={"fieldManager": "creator"}
    )
    assert created.status == 201, created.body
    labels = {".": {}, "f:app": {}}
    assert managed(created.body) == {
        ("creator", None): {
            "f:metadata": {"f:labels": labels},
            "f:spec": {
                "f:progressDeadlineSeconds": {},
                "f:replicas": {},
                "f:revisionHistoryLimit": {},
                "f:selector": {},
                "f:strategy": {
                    "f:rollingUpdate": {".": {}, "f:maxSurge": {}, "f:maxUnavailable": {}},
                    "f:type": {},
                },
                "f:template": {
                    "f:metadata": {"f:labels": labels},
                    "f:spec": {
                        "f:containers": {
                            'k:{"name":"c"}': {
                                ".": {},
                                "f:args": {},
                                "f:env": {".": {}, 'k:{"name":"X"}': {".": {}, "f:name": {}, "f:value": {}}},
                                "f:image": {},
                                "f:imagePullPolicy": {},
                                "f:name": {},
                                "f:ports": {
                                    ".": {},
                                    'k:{"containerPort":80,"protocol":"TCP"}': {
                                        ".": {},
                                        "f:containerPort": {},
                                        "f:protocol": {},
                                    },
                                },
                                "f:resources": {".": {}, "f:limits": {".": {}, "f:cpu": {}}},
                                "f:terminationMessagePath": {},
                                "f:terminationMessagePolicy": {},
                            }
                        },
                        "f:dnsPolicy": {},
                        "f:restartPolicy": {},
                        "f:schedulerName": {},
                        "f:securityContext": {},
                        "f:terminationGracePeriodSeconds": {},
                    },
                },
            },
        }
    }
    # v1.36 leaves an unset creationTimestamp out of a pod template's metadata (1.32 wrote null).
    assert created.body["spec"]["template"]["metadata"] == {"labels": {"app": "web"}}
