"""Secrets over HTTP as kube-apiserver v1.36 serves them: discovery, base64 ``data`` (what Go's
decoder refuses, and the canonical form it stores), write-only ``stringData``, the ``Opaque``
default, immutability (``type`` always; everything but metadata once ``immutable: true``), config
keys and the 1 MiB limit, the well-known types' required keys, the ``type`` field selector, the
Table kubectl prints, watches, and the memop client.

Every test runs against the in-memory server and, with USE_EXISTING_CLUSTER=true, unchanged
against a real cluster (no test makes a valid service-account-token Secret, which a real token
controller would act on).
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

import pytest

from memop.runtime import SECRETS, Client
from memop.testing.apiserver import columns
from memop.testing.apiserver.discovery import VERBS
from tests.testing.test_apiserver_tables import AGE, get_table, header, rows

if TYPE_CHECKING:
    from tests.conftest import Http

IMMUTABLE = "field is immutable when `immutable` is set"
REDACTED = 'Invalid value: "<secret contents redacted>"'
KEY_RULE = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or "
    "'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
)


def path(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/secrets" + (f"/{name}" if name else "")


def b64(text: str | bytes) -> str:
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


def secret(name: str, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, **fields}


def plain(body: dict[str, Any]) -> dict[str, str]:
    """A Secret's data, decoded."""
    return {key: base64.b64decode(value).decode() for key, value in (body.get("data") or {}).items()}


async def create(http: Http, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    reply = await http.post(path(namespace), body)
    assert reply.status == 201, reply.body
    created: dict[str, Any] = reply.body
    return created


async def refused(http: Http, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    """The 422 a create of ``body`` gets; nothing was stored."""
    reply = await http.post(path(namespace), body)
    assert reply.status == 422, reply.body
    assert reply.body["reason"] == "Invalid"
    assert (await http.get(path(namespace, body["metadata"]["name"]))).status == 404
    status: dict[str, Any] = reply.body
    return status


# --- discovery and the basic shape ---------------------------------------------------------------------


async def test_discovery_lists_secrets(http: Http) -> None:
    core = {r["name"]: r for r in (await http.get("/api/v1")).body["resources"]}
    secrets = core["secrets"]
    assert secrets["kind"] == "Secret"
    assert secrets["singularName"] == "secret"
    assert secrets["namespaced"] is True
    assert sorted(secrets["verbs"]) == VERBS
    assert "shortNames" not in secrets
    assert "categories" not in secrets
    assert "secrets/status" not in core


async def test_data_comes_back_as_sent_and_type_defaults_to_opaque(http: Http, namespace: str) -> None:
    created = await create(
        http, namespace, secret("creds", data={"user": b64("admin"), "blob": b64(bytes(range(256)))})
    )
    assert created["type"] == "Opaque"
    assert created["data"] == {"user": b64("admin"), "blob": b64(bytes(range(256)))}
    assert "generation" not in created["metadata"]
    assert "stringData" not in created
    assert "immutable" not in created
    assert (await http.get(path(namespace, "creds"))).body == created
    empty = await create(http, namespace, secret("empty", type="example.com/empty"))
    assert empty["type"] == "example.com/empty"
    assert "data" not in empty


async def test_data_is_stored_as_the_canonical_base64_of_its_bytes(http: Http, namespace: str) -> None:
    # Go's StdEncoding skips line breaks and does not check the unused bits of the last symbol.
    created = await create(http, namespace, secret("s", data={"wrapped": "YWJj\nZGVm\r\n", "bits": "YR=="}))
    assert created["data"] == {"wrapped": b64("abcdef"), "bits": b64("a")}


@pytest.mark.parametrize(
    ("value", "offset"),
    [("not base64", 3), ("YWJ", 0), ("YQ=", 3), ("YQ==YQ==", 4), ("Y===", 1), ("éA==", 0)],
)
async def test_data_that_is_not_base64_is_a_bad_request(
    http: Http, namespace: str, value: str, offset: int
) -> None:
    reply = await http.post(path(namespace), secret("s", data={"ok": b64("fine"), "bad": value}))
    assert reply.status == 400, reply.body
    assert reply.body["reason"] == "BadRequest"
    assert reply.body["message"] == (
        f'Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte {offset}'
    )
    assert (await http.get(path(namespace, "s"))).status == 404


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"data": {"k": 5}}, "cannot unmarshal number into Go struct field Secret.data of type []uint8"),
        (
            {"data": "x"},
            "cannot unmarshal string into Go struct field Secret.data of type map[string][]uint8",
        ),
        (
            {"stringData": {"k": True}},
            "cannot unmarshal bool into Go struct field Secret.stringData of type string",
        ),
        ({"type": 1}, "cannot unmarshal number into Go struct field Secret.type of type v1.SecretType"),
        ({"immutable": "yes"}, "cannot unmarshal string into Go struct field Secret.immutable of type bool"),
    ],
)
async def test_fields_of_the_wrong_json_type_are_a_bad_request(
    http: Http, namespace: str, fields: dict[str, Any], error: str
) -> None:
    reply = await http.post(path(namespace), secret("s", **fields))
    assert reply.status == 400, reply.body
    assert reply.body["message"] == f'Secret in version "v1" cannot be handled as a Secret: json: {error}'


# --- stringData -------------------------------------------------------------------------------------------


async def test_string_data_is_merged_into_data_and_never_returned(http: Http, namespace: str) -> None:
    created = await create(
        http,
        namespace,
        secret("s", data={"user": b64("old"), "kept": b64("k")}, stringData={"user": "admin", "pass": "pw"}),
    )
    assert plain(created) == {"user": "admin", "kept": "k", "pass": "pw"}  # stringData wins
    assert "stringData" not in created
    fields = created["metadata"]["managedFields"][0]["fieldsV1"]
    assert "f:stringData" not in fields
    assert set(fields["f:data"]) == {".", "f:user", "f:kept", "f:pass"}
    assert "stringData" not in (await http.get(path(namespace, "s"))).body
    listed = (await http.get(path(namespace))).body["items"]
    assert [("stringData" in item, plain(item)) for item in listed] == [(False, plain(created))]


async def test_string_data_in_a_patch_or_an_update_lands_in_data(http: Http, namespace: str) -> None:
    created = await create(http, namespace, secret("s", data={"a": b64("1")}))
    patched = await http.patch(path(namespace, "s"), {"stringData": {"b": "2"}})
    assert patched.status == 200, patched.body
    assert plain(patched.body) == {"a": "1", "b": "2"}
    assert "stringData" not in patched.body
    strategic = await http.patch(
        path(namespace, "s"),
        {"stringData": {"a": "one"}},
        content_type="application/strategic-merge-patch+json",
    )
    assert strategic.status == 200, strategic.body
    assert plain(strategic.body) == {"a": "one", "b": "2"}
    json_patch = await http.patch(
        path(namespace, "s"),
        [{"op": "add", "path": "/stringData", "value": {"b": "two"}}],
        content_type="application/json-patch+json",
    )
    assert json_patch.status == 200, json_patch.body
    assert plain(json_patch.body) == {"a": "one", "b": "two"}
    body = secret("s", stringData={"c": "3"})
    body["metadata"]["resourceVersion"] = json_patch.body["metadata"]["resourceVersion"]
    updated = await http.put(path(namespace, "s"), body)
    assert updated.status == 200, updated.body
    assert plain(updated.body) == {"c": "3"}  # a PUT replaces data, then stringData is merged in
    assert updated.body["metadata"]["uid"] == created["metadata"]["uid"]


async def test_a_patch_that_makes_bad_base64_is_invalid(http: Http, namespace: str) -> None:
    await create(http, namespace, secret("s", data={"a": b64("1")}))
    merge = await http.patch(path(namespace, "s"), {"data": {"a": "!!!"}})
    assert merge.status == 422, merge.body
    assert merge.body["details"]["causes"][0]["field"] == "patch"
    assert merge.body["message"].endswith(": illegal base64 data at input byte 0")
    strategic = await http.patch(
        path(namespace, "s"), {"data": {"a": "YQ="}}, content_type="application/strategic-merge-patch+json"
    )
    assert strategic.status == 422, strategic.body
    assert strategic.body["message"].endswith(
        ": error decoding from json: illegal base64 data at input byte 3"
    )
    json_patch = await http.patch(
        path(namespace, "s"),
        [{"op": "replace", "path": "/data/a", "value": "a b"}],
        content_type="application/json-patch+json",
    )
    assert json_patch.status == 422, json_patch.body
    assert json_patch.body["message"].endswith(": illegal base64 data at input byte 1")
    assert plain((await http.get(path(namespace, "s"))).body) == {"a": "1"}


# --- type and immutable -----------------------------------------------------------------------------------


async def test_the_type_never_changes(http: Http, namespace: str) -> None:
    await create(http, namespace, secret("s", type="example.com/one"))
    reply = await http.patch(path(namespace, "s"), {"type": "example.com/two"})
    assert reply.status == 422, reply.body
    assert reply.body["message"] == (
        'Secret "s" is invalid: type: Invalid value: "example.com/two": field is immutable'
    )
    assert reply.body["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "example.com/two": field is immutable',
            "field": "type",
        }
    ]
    # A PUT that leaves the type out sends Opaque, its default.
    current = (await http.get(path(namespace, "s"))).body
    replaced = await http.put(path(namespace, "s"), secret("s", metadata=current["metadata"]))
    assert replaced.status == 422, replaced.body
    assert (
        replaced.body["message"] == 'Secret "s" is invalid: type: Invalid value: "Opaque": field is immutable'
    )


async def test_an_immutable_secret_keeps_its_data(http: Http, namespace: str) -> None:
    await create(http, namespace, secret("s", immutable=True, data={"a": b64("1")}))
    for patch in (
        {"data": {"a": b64("2")}},
        {"data": {"b": b64("2")}},
        {"data": None},
        {"stringData": {"a": "2"}},
    ):
        reply = await http.patch(path(namespace, "s"), patch)
        assert reply.status == 422, (patch, reply.body)
        assert reply.body["message"] == f'Secret "s" is invalid: data: Forbidden: {IMMUTABLE}', patch
    unset = await http.patch(path(namespace, "s"), {"immutable": False})
    assert unset.status == 422, unset.body
    assert unset.body["message"] == f'Secret "s" is invalid: immutable: Forbidden: {IMMUTABLE}'
    both = await http.patch(path(namespace, "s"), {"immutable": None, "data": {"a": b64("2")}})
    assert [c["field"] for c in both.body["details"]["causes"]] == ["immutable", "data"]
    # stringData is merged before validation: the same bytes are no change.
    same = await http.patch(path(namespace, "s"), {"stringData": {"a": "1"}})
    assert same.status == 200, same.body
    labelled = await http.patch(path(namespace, "s"), {"metadata": {"labels": {"team": "a"}}})
    assert labelled.status == 200, labelled.body
    assert labelled.body["immutable"] is True
    assert plain(labelled.body) == {"a": "1"}
    deleted = await http.delete(path(namespace, "s"))
    assert deleted.status == 200, deleted.body
    assert (deleted.body["kind"], deleted.body["status"]) == ("Status", "Success")


async def test_a_mutable_secret_may_become_immutable(http: Http, namespace: str) -> None:
    await create(http, namespace, secret("s", immutable=False, data={"a": b64("1")}))
    reply = await http.patch(path(namespace, "s"), {"immutable": True, "stringData": {"a": "2"}})
    assert reply.status == 200, reply.body
    assert reply.body["immutable"] is True
    assert plain(reply.body) == {"a": "2"}


# --- keys, size and the well-known types ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "problems"),
    [
        ("bad key", [KEY_RULE]),
        ("a/b", [KEY_RULE]),
        ("..", ["must not be '..'"]),
        ("..a", ["must not start with '..'"]),
        ("k" * 254, ["must be no more than 253 characters"]),
    ],
)
async def test_keys_must_be_config_keys(http: Http, namespace: str, key: str, problems: list[str]) -> None:
    for fields in ({"data": {key: b64("v")}}, {"stringData": {key: "v"}}):
        status = await refused(http, namespace, secret("s", **fields))
        assert status["details"]["causes"] == [
            {
                "reason": "FieldValueInvalid",
                "message": f'Invalid value: "{key}": {problem}',
                "field": f"data[{key}]",
            }
            for problem in problems
        ]
    await create(
        http, namespace, secret("s", data={"-._aZ09": b64("v"), "k" * 253: b64("v"), ".a": b64("v")})
    )


async def test_data_may_hold_at_most_one_mebibyte(http: Http, namespace: str) -> None:
    half = b64(bytes(512 * 1024))
    status = await refused(http, namespace, secret("big", data={"a": half, "b": half}, stringData={"c": "x"}))
    assert status["message"] == 'Secret "big" is invalid: data: Too long: may not be more than 1048576 bytes'
    created = await create(http, namespace, secret("big", data={"a": half, "b": half}))
    assert len(base64.b64decode(created["data"]["a"])) == 512 * 1024


@pytest.mark.parametrize(
    ("kind", "data", "message"),
    [
        ("kubernetes.io/tls", {}, "[data[tls.crt]: Required value, data[tls.key]: Required value]"),
        ("kubernetes.io/tls", {"tls.crt": "c"}, "data[tls.key]: Required value"),
        ("kubernetes.io/basic-auth", {}, "[data[username]: Required value, data[password]: Required value]"),
        ("kubernetes.io/ssh-auth", {"ssh-privatekey": ""}, "data[ssh-privatekey]: Required value"),
        ("kubernetes.io/dockerconfigjson", {}, "data[.dockerconfigjson]: Required value"),
        (
            "kubernetes.io/dockerconfigjson",
            {".dockerconfigjson": "{"},
            f"data[.dockerconfigjson]: {REDACTED}: unexpected end of JSON input",
        ),
        (
            "kubernetes.io/dockercfg",
            {".dockercfg": "nope"},
            f"data[.dockercfg]: {REDACTED}: invalid character 'o' in literal null (expecting 'u')",
        ),
        (
            "kubernetes.io/dockercfg",
            {".dockercfg": "[]"},
            f"data[.dockercfg]: {REDACTED}: json: cannot unmarshal array into Go value of type "
            "map[string]interface {}",
        ),
        (
            "kubernetes.io/service-account-token",
            {},
            "metadata.annotations[kubernetes.io/service-account.name]: Required value",
        ),
    ],
)
async def test_the_well_known_types_require_their_keys(
    http: Http, namespace: str, kind: str, data: dict[str, str], message: str
) -> None:
    status = await refused(http, namespace, secret("s", type=kind, stringData=data))
    assert status["message"] == f'Secret "s" is invalid: {message}'


@pytest.mark.parametrize(
    ("kind", "data"),
    [
        ("kubernetes.io/tls", {"tls.crt": "", "tls.key": ""}),  # present is enough, even empty
        ("kubernetes.io/basic-auth", {"password": "pw"}),
        ("kubernetes.io/ssh-auth", {"ssh-privatekey": "k"}),
        ("kubernetes.io/dockerconfigjson", {".dockerconfigjson": '{"auths": {}}'}),
        ("kubernetes.io/dockercfg", {".dockercfg": "null"}),
    ],
)
async def test_the_well_known_types_with_their_keys(
    http: Http, namespace: str, kind: str, data: dict[str, str]
) -> None:
    created = await create(http, namespace, secret("s", type=kind, stringData=data))
    assert created["type"] == kind
    assert plain(created) == data


# --- reading: field selectors, tables, watches, the client ------------------------------------------------


async def test_secrets_are_selected_by_type(http: Http, namespace: str) -> None:
    for name, kind in (("a", "example.com/x"), ("b", "example.com/y"), ("c", "example.com/x")):
        await create(http, namespace, secret(name, type=kind))
    await create(http, namespace, secret("d"))

    async def names(selector: str) -> list[str]:
        reply = await http.get(path(namespace), query={"fieldSelector": selector})
        assert reply.status == 200, reply.body
        return sorted(item["metadata"]["name"] for item in reply.body["items"])

    assert await names("type=example.com/x") == ["a", "c"]
    assert await names("type!=example.com/x") == ["b", "d"]
    assert await names("type=Opaque,metadata.name=d") == ["d"]
    bad = await http.get(path(namespace), query={"fieldSelector": "data=x"})
    assert bad.status == 400, bad.body
    assert bad.body["message"] == "field label not supported: data"


async def test_the_table_kubectl_prints(http: Http, namespace: str) -> None:
    await create(http, namespace, secret("two", data={"a": b64("1")}, stringData={"b": "2"}))
    await create(http, namespace, secret("none", type="example.com/empty"))
    table = await get_table(http, path(namespace))
    assert header(table) == ["Name", "Type", "Data", "Age"]
    assert table["columnDefinitions"] == list(columns.SECRETS)
    cells = rows(table)
    assert {name: c[:3] for name, c in cells.items()} == {
        "two": ["two", "Opaque", 2],
        "none": ["none", "example.com/empty", 0],
    }
    assert all(AGE.match(c[3]) for c in cells.values())


async def test_a_watch_sees_data_not_string_data(http: Http, namespace: str) -> None:
    listed = (await http.get(path(namespace))).body
    async with http.watch(
        path(namespace), {"resourceVersion": listed["metadata"]["resourceVersion"]}
    ) as stream:
        await create(http, namespace, secret("s", stringData={"k": "v"}))
        await http.patch(path(namespace, "s"), {"stringData": {"k": "w"}})
        added, modified = await stream.take(2)
    assert (added["type"], plain(added["object"])) == ("ADDED", {"k": "v"})
    assert (modified["type"], plain(modified["object"])) == ("MODIFIED", {"k": "w"})
    assert "stringData" not in added["object"]
    assert "stringData" not in modified["object"]


async def test_the_client_reads_and_writes_secrets(client: Client, namespace: str) -> None:
    created = await client.create(SECRETS, secret("app", stringData={"token": "t0"}), namespace)
    assert plain(created) == {"token": "t0"}
    patched = await client.patch(SECRETS, "app", {"stringData": {"token": "t1"}}, namespace)
    assert plain(patched) == {"token": "t1"}
    got = await client.get(SECRETS, "app", namespace)
    assert got["data"] == patched["data"]
    listed = await client.list(SECRETS, namespace)
    assert [item["metadata"]["name"] for item in listed["items"]] == ["app"]
    await client.delete(SECRETS, "app", namespace)
