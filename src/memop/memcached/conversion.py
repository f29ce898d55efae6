"""Conversion between the Memcached versions: ``v1alpha1`` (the hub) and ``v1beta1`` (a spoke).

The two versions differ in one field: v1beta1's ``spec.containerPort``. v1alpha1 keeps it in
the :data:`~memop.memcached.api.CONTAINER_PORT_ANNOTATION` (the number in decimal), so every
object survives a round trip through the other version (Kubernetes' own conversions do the
same): :func:`to_hub` moves the field into the annotation, :func:`from_hub` moves it back out,
and the annotation never shows on a v1beta1 object. Everything else (metadata, status, spec
fields either version does not know) is carried over untouched.

Both functions are pure: they never change their argument and return a new object, with
``apiVersion`` set. They never raise, whatever they are given. The exact rules:

- ``to_hub``: a ``spec.containerPort`` (any value but null) is removed from the spec and
  written into the annotation, replacing one a user may have set on the v1beta1 object (the
  name is reserved to the conversion: the field is what a v1beta1 object says). Without the
  field, the annotations are left as they are.
- ``from_hub``: an annotation that spells an integer canonically (``str(n)``) becomes
  ``spec.containerPort`` and is removed (with ``metadata.annotations`` when it was the only
  one, as the server never serves an empty map); any other value (``"08080"``, ``"abc"``), or a
  spec that is absent or not an object, leaves the annotation in place and sets no port, so a
  malformed value is neither lost nor fatal (the validator and the controller report it). No
  default is filled in: the API server applies v1beta1's schema default (11211) after
  converting, as it does for every read.

Not lossless, by design, only for objects no API server hands over: a v1beta1 object that
carries the annotation itself, a v1alpha1 spec with a ``containerPort`` (its schema prunes it),
a null ``containerPort`` (the server drops nulls), and empty ``annotations`` maps (omitted).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from memop.memcached.api import (
    API_VERSION,
    API_VERSION_V1BETA1,
    CONTAINER_PORT_ANNOTATION,
    GROUP,
    KIND,
    PLURAL,
    V1BETA1,
    VERSION,
    integer_from_annotation,
)
from memop.runtime.webhook.declarations import Conversion, Spoke

__all__ = ["CONVERSION", "from_hub", "to_hub"]

Obj = dict[str, Any]
_PORT = "containerPort"


def _annotation_value(port: Any) -> str:
    # str(n) for an integer (what from_hub reads back); anything else (the v1beta1 schema allows
    # nothing else) as JSON, kept as a malformed value rather than lost.
    if isinstance(port, int) and not isinstance(port, bool):
        return str(port)
    return json.dumps(port, sort_keys=True, default=str)


def to_hub(obj: Obj) -> Obj:
    """The v1alpha1 form of the v1beta1 Memcached ``obj`` (a new object; see the module doc)."""
    out = copy.deepcopy(obj)
    out["apiVersion"] = API_VERSION
    spec = out.get("spec")
    if not isinstance(spec, dict) or spec.get(_PORT) is None:
        if isinstance(spec, dict):
            spec.pop(_PORT, None)  # null is absent, as the server drops it
        return out
    port = spec.pop(_PORT)
    meta = out.get("metadata")
    if not isinstance(meta, dict):
        # No API server sends this (it validates metadata); the port needs a place to go.
        meta = out["metadata"] = {}
    annotations = meta.get("annotations")
    if not isinstance(annotations, dict):
        annotations = meta["annotations"] = {}
    annotations[CONTAINER_PORT_ANNOTATION] = _annotation_value(port)
    return out


def from_hub(obj: Obj) -> Obj:
    """The v1beta1 form of the v1alpha1 Memcached ``obj`` (a new object; see the module doc)."""
    out = copy.deepcopy(obj)
    out["apiVersion"] = API_VERSION_V1BETA1
    meta = out.get("metadata")
    if not isinstance(meta, dict):
        return out
    annotations = meta.get("annotations")
    spec = out.get("spec")
    if not isinstance(annotations, dict) or not isinstance(spec, dict):
        return out
    port = integer_from_annotation(annotations.get(CONTAINER_PORT_ANNOTATION))
    if port is None:
        return out
    del annotations[CONTAINER_PORT_ANNOTATION]
    if not annotations:
        del meta["annotations"]
    spec[_PORT] = port
    return out


CONVERSION = Conversion(
    GROUP, KIND, PLURAL, hub=VERSION, spokes={V1BETA1: Spoke(to_hub=to_hub, from_hub=from_hub)}
)
