"""The built-in resources memop.runtime exports, and the rules ``own_kind`` grants.

The resources are checked against what a v1.36 kube-apiserver's discovery says of each
(group, version, plural, kind, scope); on the in-memory server only the resources it serves
can be asked, on a real cluster (USE_EXISTING_CLUSTER=true) every one is.
"""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys
from typing import TYPE_CHECKING

from memop import runtime
from memop.runtime.api.permissions import Rule, Scope, own_kind
from memop.runtime.client import resources
from memop.runtime.client.resources import Resource

if TYPE_CHECKING:
    from tests.conftest import ClusterHandle, Http

# (group, version, plural, kind, namespaced) of each, as a v1.36 server's discovery lists them.
V136 = {
    "NAMESPACES": ("", "v1", "namespaces", "Namespace", False),
    "PODS": ("", "v1", "pods", "Pod", True),
    "CONFIGMAPS": ("", "v1", "configmaps", "ConfigMap", True),
    "SECRETS": ("", "v1", "secrets", "Secret", True),
    "SERVICES": ("", "v1", "services", "Service", True),
    "SERVICE_ACCOUNTS": ("", "v1", "serviceaccounts", "ServiceAccount", True),
    "PERSISTENT_VOLUME_CLAIMS": ("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True),
    "EVENTS": ("", "v1", "events", "Event", True),
    "DEPLOYMENTS": ("apps", "v1", "deployments", "Deployment", True),
    "STATEFULSETS": ("apps", "v1", "statefulsets", "StatefulSet", True),
    "DAEMONSETS": ("apps", "v1", "daemonsets", "DaemonSet", True),
    "JOBS": ("batch", "v1", "jobs", "Job", True),
    "CRONJOBS": ("batch", "v1", "cronjobs", "CronJob", True),
    "INGRESSES": ("networking.k8s.io", "v1", "ingresses", "Ingress", True),
    "LEASES": ("coordination.k8s.io", "v1", "leases", "Lease", True),
    "ROLES": ("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    "ROLE_BINDINGS": ("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    "CLUSTER_ROLES": ("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    "CLUSTER_ROLE_BINDINGS": (
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        False,
    ),
}


def test_the_common_built_in_resources_are_exported_with_their_names() -> None:
    for name, (group, version, plural, kind, namespaced) in V136.items():
        resource = getattr(runtime, name)
        assert resource is getattr(resources, name)
        assert name in runtime.__all__
        assert resource == Resource(group, version, plural, kind, namespaced=namespaced), name


async def test_each_resource_is_what_the_servers_discovery_says(cluster: ClusterHandle, http: Http) -> None:
    asked = 0
    for name in V136:
        resource: Resource = getattr(resources, name)
        path = f"/apis/{resource.api_version}" if resource.group else f"/api/{resource.version}"
        reply = await http.get(path)
        served = {r["name"]: r for r in reply.body["resources"]} if reply.status == 200 else {}
        if resource.plural not in served:
            assert not cluster.real, f"a real server serves {name} ({path} answered {reply.status})"
            continue  # the in-memory server serves only the kinds its tests need
        assert served[resource.plural]["kind"] == resource.kind, name
        assert served[resource.plural]["namespaced"] is resource.namespaced, name
        asked += 1
    assert asked >= 10  # the in-memory server serves most of them


def _triples(rules: tuple[Rule, ...]) -> set[tuple[str, str, str]]:
    return {rule.triple for rule in rules}


def test_own_kind_grants_what_the_cache_and_status_writes_send_by_default() -> None:
    rules = own_kind("example.com", "widgets")
    assert _triples(rules) == {
        ("example.com", "widgets", "list"),
        ("example.com", "widgets", "watch"),
        ("example.com", "widgets/status", "patch"),
    }
    assert all(rule.scope is Scope.WATCHED and rule.sent and rule.why for rule in rules)
    assert _triples(own_kind("example.com", "widgets", status=False)) == {
        ("example.com", "widgets", "list"),
        ("example.com", "widgets", "watch"),
    }


def test_own_kind_grants_patch_for_a_finalizer_and_the_finalizers_subresource_for_owner_references() -> None:
    base = _triples(own_kind("example.com", "widgets"))
    with_finalizer = own_kind("example.com", "widgets", finalizers=True)
    assert _triples(with_finalizer) - base == {("example.com", "widgets", "patch")}
    assert all(rule.sent for rule in with_finalizer)
    owning = own_kind("example.com", "widgets", owner_references=True)
    (extra,) = [rule for rule in owning if rule.triple not in base]
    assert extra.triple == ("example.com", "widgets/finalizers", "update")
    assert not extra.sent  # admission checks it; no request of the controller sends it
    assert "blockOwnerDeletion" in extra.why


def test_the_operators_get_what_their_code_sends_on_their_own_kind() -> None:
    from memop.memcached import RULES as MEMCACHED  # noqa: PLC0415
    from memop.mypod import RULES as MYPOD  # noqa: PLC0415
    from memop.podset import RULES as PODSET  # noqa: PLC0415

    # Memcached adds and removes a finalizer and owns its Deployment; PodSet and MyPod own pods
    # with blockOwnerDeletion and set no finalizer.
    assert ("cache.example.com", "memcacheds", "patch") in _triples(MEMCACHED)
    assert ("cache.example.com", "memcacheds/finalizers", "update") in _triples(MEMCACHED)
    for rules, group, plural in (
        (PODSET, "batch.tutorial.kubebuilder.io", "podsets"),
        (MYPOD, "harryyann.github.io", "mypods"),
    ):
        assert (group, plural, "patch") not in _triples(rules)
        assert (group, f"{plural}/finalizers", "update") in _triples(rules)


def test_a_resource_hashes_as_its_fields_and_is_rebuilt_when_copied() -> None:
    made = Resource("apps", "v1", "deployments", "Deployment")
    assert made == resources.DEPLOYMENTS
    assert hash(made) == hash(resources.DEPLOYMENTS)
    assert {made: 1}[resources.DEPLOYMENTS] == 1
    assert made != Resource("apps", "v1", "deployments", "Deployment", namespaced=False)
    for copied in (pickle.loads(pickle.dumps(made)), copy.copy(made), copy.deepcopy(made)):
        assert copied == made
        assert hash(copied) == hash(made)
    assert (
        repr(made)
        == "Resource(group='apps', version='v1', plural='deployments', kind='Deployment', namespaced=True)"
    )


def test_a_resource_pickled_in_another_process_hashes_as_this_process_does() -> None:
    # Another process has another string hash seed: a hash carried in the pickle would be its.
    pickled = subprocess.run(
        [sys.executable, "-c", "import pickle, sys; from memop.runtime.client.resources import DEPLOYMENTS; "
         "sys.stdout.buffer.write(pickle.dumps(DEPLOYMENTS))"],
        capture_output=True, check=True, env={**os.environ, "PYTHONHASHSEED": "12345"},
    ).stdout  # fmt: skip
    assert {resources.DEPLOYMENTS: 1}[pickle.loads(pickled)] == 1
