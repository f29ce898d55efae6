"""A child written without its owner's bucket label, on a sharded cache: said once per kind.

Sharded replicas watch children by the label ``sharding.memop.dev/bucket``; a controller that
forgets ``cache.shard_labels(owner)`` on what it creates makes children no replica sees, and its
next reconcile creates them again. The cache says so where the author looks, in one line.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from memop.runtime.cache.cache import Cache
from memop.runtime.client.reachability import Reachability
from memop.runtime.client.resources import CONFIGMAPS, SECRETS
from memop.runtime.sharding.keys import BY_OWNER_BUCKET
from memop.runtime.sharding.ring import BUCKET_LABEL, Ring

OWNER = {"metadata": {"name": "owner", "namespace": "ns", "uid": "6f1c1c52-3c0b-4c39-9b43-0b1f1f0d2a11"}}


async def _never_probed() -> int:
    raise AssertionError("the cache never starts: nothing is probed")


class _NeverCalled:
    """A client for a cache that never starts: nothing is listed or watched."""

    reachability = Reachability(_never_probed)


def _cache(*, sharded: bool) -> Cache:
    cache = Cache(_NeverCalled(), namespaces=["ns"])  # type: ignore[arg-type]  # never started
    cache.informer(CONFIGMAPS, shard_key=BY_OWNER_BUCKET)
    cache.informer(SECRETS, shard_key=BY_OWNER_BUCKET)
    if sharded:
        cache.enable_sharding(Ring(4), server_side=True)
    return cache


def _child(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "ns", "resourceVersion": "7"}
    if labels is not None:
        metadata["labels"] = labels
    return {"metadata": metadata}


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "memop.cache" and r.levelno >= logging.ERROR]


def test_a_child_without_the_bucket_label_is_said_once_per_kind(caplog: pytest.LogCaptureFixture) -> None:
    cache = _cache(sharded=True)
    cache.record_write(CONFIGMAPS, _child("a"))
    cache.record_write(CONFIGMAPS, _child("b", {"app": "x"}))
    cache.record_write(CONFIGMAPS, _child("c", cache.shard_labels(OWNER)))
    [line] = _errors(caplog)
    assert line.startswith(f"ConfigMap ns/a was written without the label {BUCKET_LABEL}")
    assert "cache.shard_labels(owner)" in line
    cache.record_write(SECRETS, _child("s"))
    assert len(_errors(caplog)) == 2


def test_a_child_labelled_with_shard_labels_or_an_unsharded_cache_says_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sharded = _cache(sharded=True)
    sharded.record_write(CONFIGMAPS, _child("a", sharded.shard_labels(OWNER)))
    unsharded = _cache(sharded=False)
    assert unsharded.shard_labels(OWNER) == {}
    unsharded.record_write(CONFIGMAPS, _child("b"))
    assert _errors(caplog) == []
