"""Request paths to RequestInfo, as kube-apiserver's ``RequestInfoFactory`` parses them.

``/api/v1/namespaces/ns/pods/name/status`` -> group "", version v1, namespace ns, resource pods,
name, subresource status; ``/apis/apps/v1/deployments`` -> a list (or watch) across
namespaces; the legacy ``/watch/`` prefix and ``?watch=true`` make a GET a watch. A namespace
object's own path (``/api/v1/namespaces/ns[/status|/finalize]``) names the namespace both as
object and as request namespace, as in Kubernetes. Anything else is a non-resource request.

:func:`check_scope` answers what kube-apiserver has no route for: a cluster-scoped kind under
``/namespaces/{ns}/``, and a namespaced kind without one except to list or watch it across
namespaces.
"""

from __future__ import annotations

from collections.abc import Mapping

from memop.testing.apiserver.errors import method_not_allowed, not_found_path
from memop.testing.apiserver.requestlog import RequestInfo

_NAMESPACE_SUBRESOURCES = frozenset(("status", "finalize"))
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def is_true(value: str | None) -> bool:
    return value is not None and value.lower() in ("true", "1")


def parse_request(method: str, path: str, query: Mapping[str, str]) -> RequestInfo:
    """Parse one request; non-resource requests get the HTTP method in lower case as verb."""
    parts = [p for p in path.split("/") if p]
    plain = RequestInfo(verb=method.lower(), path=path)
    if not parts or parts[0] not in ("api", "apis"):
        return plain
    if parts[0] == "api":
        if len(parts) < 3:
            return plain
        group, version, rest = "", parts[1], parts[2:]
    else:
        if len(parts) < 4:
            return plain
        group, version, rest = parts[1], parts[2], parts[3:]
    watch_prefix = rest[0] == "watch"
    if watch_prefix:
        rest = rest[1:]
        if not rest:
            return plain
    namespace = ""
    namespaced_path = False
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
            namespaced_path = True
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = "/".join(rest[2:]) if len(rest) > 2 else ""
    if method == "GET":
        watch = watch_prefix or is_true(query.get("watch"))
        verb = "watch" if watch else ("get" if name else "list")
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = _VERBS.get(method, method.lower())
    return RequestInfo(
        verb=verb,
        path=path,
        resource_request=True,
        group=group,
        version=version,
        resource=resource,
        subresource=subresource,
        namespace=namespace,
        name=name,
        namespaced_path=namespaced_path,
    )


def check_scope(info: RequestInfo, *, namespaced: bool, builtin: bool) -> None:
    """Raise what kube-apiserver answers when the path does not fit the kind's scope.

    Built-in kinds are routed by path: a cluster-scoped kind has no route under
    ``/namespaces/{ns}/`` and a namespaced kind only a GET one (list or watch) across namespaces,
    so anything else is 404 NotFound, or 405 for another method on that collection. The
    apiextensions server hands a custom resource request whose scope does not fit its CRD to the
    next handler (404), except a list or watch of a namespaced one across namespaces.
    """
    if not namespaced:
        if info.namespaced_path:
            raise not_found_path()
        return
    if info.namespaced_path:
        return
    if not builtin:
        if info.verb not in ("list", "watch"):
            raise not_found_path()
    elif info.name:
        raise not_found_path()
    elif info.verb not in ("list", "watch"):
        raise method_not_allowed()
