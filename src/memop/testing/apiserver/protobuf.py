"""Kubernetes' protobuf request bodies (``application/vnd.kubernetes.protobuf``), read as JSON.

kubectl sends the objects its typed generators build as protobuf (``kubectl create namespace``,
``create configmap``, ``create secret``, ``create serviceaccount``, ``create deployment``,
``create service``, ``create role``/``rolebinding``/``clusterrole``/``clusterrolebinding``,
``create poddisruptionbudget``); what it reads from a file (``create -f``, ``apply``, ``replace``),
patches and deletes go as JSON. The in-memory API server decodes such a body into the JSON
object the same request would have carried as ``application/json`` (:func:`decode`), so the rest
of the request runs the JSON path unchanged; responses stay JSON, which kubectl accepts too.

The encoding (k8s.io/apimachinery/pkg/runtime/serializer/protobuf): the 4-byte magic ``k8s\\0``,
then a ``runtime.Unknown``: field 1 its TypeMeta {1: apiVersion, 2: kind}, field 2 the object's
own message, field 3 a content encoding (always empty), field 4 a content type (empty). The
objects' messages are in :mod:`memop.testing.apiserver.protokinds`.
"""

from __future__ import annotations

from typing import Any

from memop.testing.apiserver.protokinds import KINDS
from memop.testing.apiserver.protowire import LENGTH, UnknownField, WireError, read_fields
from memop.testing.apiserver.protowire import decode as decode_message

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
# What a client can do instead, said in every refusal.
INSTEAD = (
    "send it as application/json instead: kubectl create -f FILE or kubectl apply -f FILE do, and a "
    "generator's output can be piped (kubectl create ... --dry-run=client -o yaml | kubectl apply -f -)"
)


class MalformedProtobuf(ValueError):
    """The body is not a Kubernetes protobuf encoding (a 400 Bad Request)."""


class UndecodableProtobuf(Exception):
    """A well-formed protobuf body the in-memory server cannot read: a kind or a field its tables
    do not declare (a 415 Unsupported Media Type; the message says what to send instead)."""


def decoded_kinds() -> list[str]:
    """The kinds :func:`decode` reads, as ``Kind`` (``apiVersion``) for messages."""
    return [f"{kind} ({api_version})" for api_version, kind in KINDS]


def decode(body: bytes) -> dict[str, Any]:
    """The JSON object a protobuf request body stands for: ``kind`` and ``apiVersion`` from its
    TypeMeta, then the object's fields as Go's encoding/json writes them (the JSON kubectl would
    have sent). Raises :class:`MalformedProtobuf` for bytes that are not such a body and
    :class:`UndecodableProtobuf` for a kind or field not known here."""
    if not body.startswith(MAGIC):
        raise MalformedProtobuf(f"the body does not start with the protobuf magic {MAGIC!r}")
    api_version = kind = ""
    raw = b""
    try:
        for number, wire, value in read_fields(body[len(MAGIC) :]):
            if wire != LENGTH or not isinstance(value, bytes):
                raise MalformedProtobuf(f"runtime.Unknown field {number} is not length-delimited")
            if number == 1:
                for meta_number, _, meta_value in read_fields(value):
                    if isinstance(meta_value, bytes) and meta_number in (1, 2):
                        text = meta_value.decode("utf-8", errors="replace")
                        api_version, kind = (text, kind) if meta_number == 1 else (api_version, text)
            elif number == 2:
                raw = value
            elif number in (3, 4) and value:
                # Compressed or nested encodings: kubectl never sends them.
                what = "content encoding" if number == 3 else "content type"
                raise UndecodableProtobuf(
                    f"the in-memory API server does not decode a protobuf body with the {what} "
                    f"{value.decode('utf-8', errors='replace')!r}; {INSTEAD}"
                )
        msg = KINDS.get((api_version, kind))
        if msg is None:
            raise UndecodableProtobuf(
                f"the in-memory API server decodes {MEDIA_TYPE} bodies only for "
                f"{', '.join(decoded_kinds())}, not {kind or 'an object without a kind'}"
                f"{f' ({api_version})' if api_version else ''}; {INSTEAD}"
            )
        return {"kind": kind, "apiVersion": api_version, **decode_message(msg, raw)}
    except UnknownField as error:
        raise UndecodableProtobuf(
            f"the in-memory API server does not decode {error} in this {MEDIA_TYPE} body of "
            f"{kind} ({api_version}); {INSTEAD}"
        ) from None
    except WireError as error:
        raise MalformedProtobuf(f"the {MEDIA_TYPE} body is not valid protobuf: {error}") from None
