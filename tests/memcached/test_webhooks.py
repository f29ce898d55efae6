"""The Memcached admission webhook's declaration and its validator, called directly (the HTTP
handler that answers AdmissionReviews is the runtime's, tested there)."""

from __future__ import annotations

from typing import Any

import pytest

from memop.memcached import DEFINITION
from memop.memcached.api import (
    API_VERSION,
    API_VERSION_V1BETA1,
    CONTAINER_PORT_ANNOTATION,
    GROUP,
    InvalidSpec,
    parse_spec,
)
from memop.memcached.webhooks import WEBHOOK, MemcachedValidator
from memop.runtime.webhook.declarations import AdmissionRequest, FieldError, ValidationError

A = CONTAINER_PORT_ANNOTATION


def memcached(spec: dict[str, Any], api_version: str = API_VERSION, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": "Memcached",
        "metadata": {"name": "cache", "namespace": "ns", **meta},
        "spec": spec,
    }


def request(
    operation: str, obj: dict[str, Any] | None, old: dict[str, Any] | None = None
) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u",
        operation=operation,  # type: ignore[arg-type]
        kind=(GROUP, "v1alpha1", "Memcached"),
        resource=(GROUP, "v1alpha1", "memcacheds"),
        namespace="ns",
        name="cache",
        object=obj,
        old_object=old,
        dry_run=False,
        user_info={"username": "alice"},
    )


VALIDATOR = MemcachedValidator()


async def create(obj: dict[str, Any]) -> list[str]:
    return list(await VALIDATOR.validate_create(obj, request("CREATE", obj)))


async def update(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return list(await VALIDATOR.validate_update(old, new, request("UPDATE", new, old)))


def test_the_declaration() -> None:
    assert DEFINITION.webhooks == (WEBHOOK,)
    assert (WEBHOOK.group, WEBHOOK.version, WEBHOOK.kind, WEBHOOK.plural) == (
        GROUP,
        "v1alpha1",
        "Memcached",
        "memcacheds",
    )
    assert WEBHOOK.defaulter is None  # the schema's defaults do it all (see the module docstring)
    assert isinstance(WEBHOOK.validator, MemcachedValidator)
    assert WEBHOOK.operations == ("CREATE", "UPDATE")
    # On the hub version, Equivalent: v1beta1 requests reach it converted to v1alpha1.
    assert WEBHOOK.match_policy == "Equivalent"
    assert WEBHOOK.validating_path == "/validate-cache-example-com-v1alpha1-memcached"


async def test_a_valid_memcached_is_accepted_without_warnings() -> None:
    assert await create(memcached({"size": 3, "resources": {"limits": {"memory": "96Mi"}}})) == []
    assert await create(memcached({}, annotations={A: "8080"})) == []


# What the schema cannot say; each is one FieldError, worded as the InvalidSpec condition is.
DENIED: dict[str, tuple[dict[str, Any], dict[str, Any], list[str]]] = {
    "requests above limits": (
        {"resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "1500m"}}},
        {},
        ["spec.resources.requests.cpu"],
    ),
    "an unknown resource": ({"resources": {"limits": {"gpu": "1"}}}, {}, ["spec.resources.limits.gpu"]),
    "a negative quantity": (
        {"resources": {"limits": {"memory": "-1Mi"}}},
        {},
        ["spec.resources.limits.memory"],
    ),
    "a bad port annotation": ({}, {"annotations": {A: "http"}}, [f"metadata.annotations[{A}]"]),
    "a port out of range": ({}, {"annotations": {A: "70000"}}, [f"metadata.annotations[{A}]"]),
    "two at once": (
        {"size": -1, "image": ""},
        {"annotations": {A: "0"}},
        [f"metadata.annotations[{A}]", "spec.size", "spec.image"],
    ),
}


@pytest.mark.parametrize("case", list(DENIED))
async def test_what_parse_spec_refuses_is_denied_field_by_field(case: str) -> None:
    spec, meta, fields = DENIED[case]
    obj = memcached(spec, **meta)
    with pytest.raises(InvalidSpec) as invalid:
        parse_spec(obj)
    with pytest.raises(ValidationError) as denied:
        await create(obj)
    assert [e.field for e in denied.value.errors] == fields
    # The same words as the condition: "<field>: <message>" each.
    assert [f"{e.field}: {e.message}" for e in denied.value.errors] == [
        e.message for e in invalid.value.errors
    ]
    assert all(e.reason == "FieldValueInvalid" for e in denied.value.errors)


async def test_a_type_error_is_a_type_cause() -> None:
    with pytest.raises(ValidationError) as denied:
        await create(memcached({"size": "three"}))
    assert denied.value.errors == (
        FieldError(
            "spec.size",
            'Invalid value: "string": spec.size in body must be of type integer: "string"',
            "FieldValueTypeInvalid",
        ),
    )


async def test_a_v1beta1_object_is_converted_first() -> None:
    # With matchPolicy Exact on v1beta1 the validator could be given one: it judges the hub form.
    assert await create(memcached({"containerPort": 8080}, API_VERSION_V1BETA1)) == []
    with pytest.raises(ValidationError) as denied:
        await create(memcached({"containerPort": 0}, API_VERSION_V1BETA1))
    assert [e.field for e in denied.value.errors] == [f"metadata.annotations[{A}]"]


async def test_warnings() -> None:
    assert await create(memcached({"size": 0})) == [
        "spec.size is 0: the Deployment is kept with no memcached pods"
    ]
    (warning,) = await create(memcached({"memoryLimitMiB": 64, "resources": {"limits": {"memory": "64Mi"}}}))
    assert warning.startswith("spec.memoryLimitMiB (64 MiB of items) leaves memcached no room")
    assert await create(memcached({"memoryLimitMiB": 64, "resources": {"limits": {"memory": "65Mi"}}})) == []
    assert await update(memcached({}), memcached({"size": 0})) == [
        "spec.size is 0: the Deployment is kept with no memcached pods"
    ]


async def test_an_update_that_makes_it_invalid_is_denied() -> None:
    with pytest.raises(ValidationError):
        await update(memcached({"size": 1}), memcached({"size": 1, "resources": {"limits": {"cpu": "-1"}}}))
    with pytest.raises(ValidationError):
        await update(memcached({}), memcached({}, annotations={A: "x"}))


async def test_an_invalid_object_left_as_it_was_can_still_be_updated() -> None:
    # Stored before the webhook existed: its finalizer, labels and deletion must still go through.
    bad = memcached({"resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "2"}}}, annotations={A: "x"})
    touched = memcached(
        bad["spec"],
        annotations={A: "x", "note": "y"},
        finalizers=["cache.example.com/finalizer"],
        labels={"a": "b"},
    )
    (warning,) = await update(bad, touched)
    assert warning.startswith(
        f"this Memcached is invalid, and left as it was: metadata.annotations[{A}]: Invalid"
    )
    assert "; spec.resources.requests.cpu: Invalid value: " in warning
    # Changing the spec of an invalid object must make it valid.
    with pytest.raises(ValidationError):
        await update(bad, memcached({**bad["spec"], "size": 2}, annotations={A: "x"}))
    assert await update(bad, memcached({}, annotations={A: "8080"})) == []


async def test_delete_is_always_allowed() -> None:
    obj = memcached({"size": -1})
    assert list(await VALIDATOR.validate_delete(obj, request("DELETE", None, obj))) == []
