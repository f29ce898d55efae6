"""The rule comparisons of RBAC's escalation check, as Kubernetes' ``policy_comparator.go``
(``Covers``, ``BreakdownRule``) and ``CompactString`` decide them, table by table."""

from __future__ import annotations

from typing import Any

import pytest

from memop.testing.auth.rbac import breakdown, compact_string, uncovered


def rule(
    groups: list[str], resources: list[str], verbs: list[str], names: list[str] | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {"apiGroups": groups, "resources": resources, "verbs": verbs}
    if names:
        out["resourceNames"] = names
    return out


def url(path: str) -> dict[str, Any]:
    return {"nonResourceURLs": [path], "verbs": ["get"]}


# (owner's rules, the rule granted, covered?) and why Covers answers so.
COVERS = [
    # * on *.* covers anything.
    ([rule(["*"], ["*"], ["*"])], rule(["apps"], ["deployments/scale"], ["update"], ["web"]), True),
    # A verb is needed for each verb granted.
    ([rule([""], ["pods"], ["get"])], rule([""], ["pods"], ["get", "list"]), False),
    # Rules add up across owner rules, sub-rule by sub-rule.
    ([rule([""], ["pods"], ["get"]), rule([""], ["pods"], ["list"])],
     rule([""], ["pods"], ["get", "list"]), True),
    # Names: an owner rule without names covers any name; with names only those, and never none.
    ([rule([""], ["pods"], ["get"])], rule([""], ["pods"], ["get"], ["a"]), True),
    ([rule([""], ["pods"], ["get"], ["a"])], rule([""], ["pods"], ["get"], ["a"]), True),
    ([rule([""], ["pods"], ["get"], ["a"])], rule([""], ["pods"], ["get"], ["b"]), False),
    ([rule([""], ["pods"], ["get"], ["a"])], rule([""], ["pods"], ["get"]), False),
    # */subresource covers that subresource of any resource, not the resource.
    ([rule(["apps"], ["*/scale"], ["get"])], rule(["apps"], ["deployments/scale"], ["get"]), True),
    ([rule(["apps"], ["*/scale"], ["get"])], rule(["apps"], ["deployments"], ["get"]), False),
    # The group must match (or be *).
    ([rule([""], ["deployments"], ["get"])], rule(["apps"], ["deployments"], ["get"]), False),
    # Non-resource URLs: exact, or a prefix ending in *.
    ([url("/logs/*")], url("/logs/a"), True),
    ([url("/logs")], url("/logs/a"), False),
]  # fmt: skip


@pytest.mark.parametrize(("owner", "granted", "covered"), COVERS)
def test_covers(owner: list[dict[str, Any]], granted: dict[str, Any], covered: bool) -> None:
    assert (not uncovered(owner, [granted])) is covered


def test_breakdown_and_compact_string() -> None:
    # One sub-rule per group, resource, verb and name, in that nesting order.
    assert breakdown(rule(["", "apps"], ["x"], ["get"], ["a", "b"])) == [
        rule([""], ["x"], ["get"], ["a"]),
        rule([""], ["x"], ["get"], ["b"]),
        rule(["apps"], ["x"], ["get"], ["a"]),
        rule(["apps"], ["x"], ["get"], ["b"]),
    ]
    # Go's %q of a []string: quoted, space separated; fields in PolicyRule's order, empty ones out.
    assert compact_string(rule(["apps"], ["deployments"], ["get", "list"], ["web"])) == (
        '{APIGroups:["apps"], Resources:["deployments"], ResourceNames:["web"], Verbs:["get" "list"]}'
    )
    assert compact_string({"nonResourceURLs": ["/metrics"], "verbs": ["get"]}) == (
        '{NonResourceURLs:["/metrics"], Verbs:["get"]}'
    )
