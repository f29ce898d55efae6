"""The API server's name rules, once in memop.runtime.api.validation (projects, flags, scaffold)."""

from __future__ import annotations

import pytest

from memop.runtime.api.validation import is_dns1035_label, is_dns1123_label, is_dns1123_subdomain


@pytest.mark.parametrize("name", ["a", "a-1", "1a", "x" * 63])
def test_dns1123_labels_kubernetes_accepts(name: str) -> None:
    assert is_dns1123_label(name)
    assert is_dns1123_subdomain(name)


@pytest.mark.parametrize("name", ["", "A", "-a", "a-", "a.b", "a_b", "x" * 64, "abc\n"])
def test_dns1123_labels_kubernetes_refuses(name: str) -> None:
    # "abc\n": a regex anchored with "$" would take it (it matches before a final newline).
    assert not is_dns1123_label(name)


def test_dns1123_subdomains() -> None:
    assert is_dns1123_subdomain("memop-leader.cache.example.com")
    assert is_dns1123_subdomain(".".join(["x" * 63] * 3) + "." + "y" * 61)  # 253
    assert not is_dns1123_subdomain(".".join(["x" * 63] * 3) + "." + "y" * 62)  # 254
    for name in ("a..b", ".a", "a.", "A.b", "a.b\n"):
        assert not is_dns1123_subdomain(name), name


def test_dns1035_labels_start_with_a_letter() -> None:
    assert is_dns1035_label("widgets")
    assert not is_dns1035_label("1widgets")
    assert not is_dns1035_label("x" * 64)
