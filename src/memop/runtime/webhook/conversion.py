"""Answering ``apiextensions.k8s.io/v1`` ConversionReviews with the kinds' hub-and-spoke
conversions.

One handler serves every kind at :data:`~memop.runtime.webhook.declarations.CONVERSION_PATH`,
choosing each object's :class:`~memop.runtime.webhook.declarations.Conversion` by its group and
kind. An object goes spoke → hub → spoke (one step when either end is the hub; unchanged when
it is already at ``desiredAPIVersion``, which the API server never sends but costs nothing),
and memop sets ``apiVersion`` after each step.

The answer is a ConversionReview of the same apiVersion whose ``response.uid`` is the
request's and whose ``result`` is ``{status: Success}`` with every object converted, or
``{status: Failure, message}`` with none (an unknown kind or version, a conversion that
raises or returns no object, or changes what the API server refuses to see changed: kind,
name, namespace, uid), with one log line. A body that is no valid ConversionReview is a
``400`` as for admission (:func:`memop.runtime.webhook.admission.bad_request`).

The API server restores every other ``metadata`` field from the original after conversion
(only labels and annotations may change), so memop does not check those.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from memop.runtime.logs import log_context
from memop.runtime.webhook.admission import BadReview, bad_request, load_review
from memop.runtime.webhook.declarations import CONVERSION_PATH, Conversion, Obj

log = logging.getLogger("memop.webhook")

REVIEW_VERSIONS = ("apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1")
_KEPT_METADATA = ("name", "namespace", "uid")


class ConversionFailed(Exception):
    """An object cannot be converted; the message says which and why."""


class ConversionHandler:
    """Converts objects of every kind in ``conversions`` (one :class:`Conversion` per group and
    kind: a second one for the same kind is a ValueError)."""

    def __init__(self, conversions: Iterable[Conversion] = ()) -> None:
        self._by_kind: dict[tuple[str, str], Conversion] = {}
        for conversion in conversions:
            self.add(conversion)

    def add(self, conversion: Conversion) -> None:
        key = (conversion.group, conversion.kind)
        if key in self._by_kind:
            raise ValueError(f"two conversions declared for {conversion.kind}.{conversion.group}")
        self._by_kind[key] = conversion

    def __bool__(self) -> bool:
        return bool(self._by_kind)

    async def handle(self, body: bytes, content_type: str) -> tuple[int, bytes]:
        """The HTTP status and body answering one POSTed ConversionReview."""
        try:
            review, desired, objects = _load(body, content_type)
        except BadReview as error:
            log.warning("bad conversion request: %s", error, extra={"webhook": CONVERSION_PATH})
            return bad_request(str(error))
        uid = review["request"]["uid"]
        try:
            converted = [self.convert(obj, desired) for obj in objects]
        except ConversionFailed as error:
            with log_context(webhook=CONVERSION_PATH, uid=uid):
                log.error("conversion to %s failed: %s", desired, error, exc_info=error.__cause__)
            response: dict[str, Any] = {
                "uid": uid,
                "convertedObjects": [],
                "result": {"metadata": {}, "status": "Failure", "message": str(error)},
            }
        else:
            response = {
                "uid": uid,
                "convertedObjects": converted,
                "result": {"metadata": {}, "status": "Success"},
            }
        reply = {"apiVersion": review["apiVersion"], "kind": "ConversionReview", "response": response}
        return 200, orjson.dumps(reply)

    def convert(self, obj: object, desired_api_version: str) -> Obj:
        """``obj`` converted to ``desired_api_version`` (``group/version``), or
        ConversionFailed saying why not."""
        if not isinstance(obj, dict):
            raise ConversionFailed(f"expected an object to convert, got JSON {type(obj).__name__}")
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if not isinstance(api_version, str) or not isinstance(kind, str):
            raise ConversionFailed("an object to convert has no apiVersion or kind")
        group, version = _split(api_version)
        desired_group, desired_version = _split(desired_api_version)
        name = _describe(obj)
        if desired_group != group:
            raise ConversionFailed(
                f"cannot convert {kind} {name} of group {group!r} to {desired_api_version}"
            )
        conversion = self._by_kind.get((group, kind))
        if conversion is None:
            known = ", ".join(sorted(f"{k}.{g}" for g, k in self._by_kind)) or "none"
            raise ConversionFailed(f"no conversion is declared for {kind}.{group} (declared: {known})")
        for wanted in (version, desired_version):
            if wanted not in conversion.versions:
                raise ConversionFailed(
                    f"{kind}.{group} has no version {wanted!r} (versions: {', '.join(conversion.versions)})"
                )
        if version == desired_version:
            return obj
        hub = obj
        if version != conversion.hub:
            hub = _step(
                obj, conversion.spokes[version].to_hub, f"{group}/{conversion.hub}", version, conversion.hub
            )
        result = hub
        if desired_version != conversion.hub:
            spoke = conversion.spokes[desired_version].from_hub
            result = _step(hub, spoke, desired_api_version, conversion.hub, desired_version)
        return result


def _load(body: bytes, content_type: str) -> tuple[dict[str, Any], str, list[Any]]:
    """The review, its desiredAPIVersion and objects; BadReview when it is no valid review."""
    review = load_review(body, content_type, REVIEW_VERSIONS, "ConversionReview")
    desired = review["request"].get("desiredAPIVersion")
    objects = review["request"].get("objects")
    if not isinstance(desired, str) or not desired:
        raise BadReview("the ConversionReview's request has no desiredAPIVersion")
    if not isinstance(objects, list):
        raise BadReview("the ConversionReview's request.objects is not a list")
    return review, desired, objects


def _step(obj: Obj, function: Callable[[Obj], Obj], api_version: str, source: str, target: str) -> Obj:
    """One conversion function applied and checked, its result set to ``api_version``."""
    kind, name = obj["kind"], _describe(obj)
    what = f"the {source} → {target} conversion of {kind} {name}"
    try:
        result = function(obj)
    except Exception as error:
        raise ConversionFailed(f"{what} failed: {type(error).__name__}: {error}") from error
    if not isinstance(result, dict):
        raise ConversionFailed(f"{what} returned {type(result).__name__}, not an object")
    if result.get("kind") != kind:
        raise ConversionFailed(f"{what} changed the kind to {result.get('kind')!r}")
    before, after = _metadata(obj), _metadata(result)
    for key in _KEPT_METADATA:
        if before.get(key) != after.get(key):
            raise ConversionFailed(
                f"{what} changed metadata.{key} ({before.get(key)!r} → {after.get(key)!r}): "
                "the API server refuses that"
            )
    result["apiVersion"] = api_version
    return result


def _metadata(obj: Obj) -> dict[str, Any]:
    metadata = obj.get("metadata")
    return metadata if isinstance(metadata, dict) else {}


def _describe(obj: Obj) -> str:
    metadata = _metadata(obj)
    name = metadata.get("name", "")
    namespace = metadata.get("namespace")
    return f"{namespace}/{name}" if namespace else str(name)


def _split(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version
