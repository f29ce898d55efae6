"""The kustomize layout of a project's ``manifests/``: the parts (``rbac``, ``manager``; ``crd``
is :mod:`memop.manifests.crds`'s) and the installs and add-ons built on them, as kustomizations
and the patches they apply.

- ``default``: the cluster-wide install (CRDs, RBAC with a ClusterRole, the manager);
- ``namespaced``: the operator watches its own namespace, with a Role there instead;
  ``namespaced/multi``: several namespaces, a Role in each;
- ``leader-for-life``: the cluster-wide install electing its leader for life (a ConfigMap lock
  owned by the leader's Pod) instead of with a Lease;
- ``secure-metrics``: the cluster-wide install serving /metrics over HTTPS to authorised callers;
- ``sharded``: the cluster-wide install whose replicas split the work (``--sharding``: each
  reconciles the objects of the shards its Leases give it) instead of electing a leader;
- ``webhook-self-managed`` (a project serving webhooks): the cluster-wide install whose operator
  makes its own webhook certificates, for clusters without cert-manager;
- ``prometheus`` and ``prometheus-secure``: a metrics Service, a ServiceMonitor and the alert
  rules, for the plain and the secure install; ``grafana``: the dashboard as a ConfigMap.

A project that declares webhooks (admission or conversion) gets them in every install: the
installs that build on ``crd``, ``rbac`` and ``manager`` list the Components ``webhook``
(:mod:`memop.manifests.webhooks`) and ``certmanager`` (:mod:`memop.manifests.certmanager`), the
others inherit them from ``default``.

Every install names its objects ``<project>-<name>`` in the project's namespace (but the CRDs
and the Namespace) and labels everything ``app.kubernetes.io/part-of: <project>``.
"""

from __future__ import annotations

from memop.manifests import certmanager, webhooks
from memop.manifests.manager import (
    METRICS_MONITOR,
    deployment_patch,
    manager_container_patch,
    manager_deployment,
    scalar,
)
from memop.manifests.monitoring import dashboard_file
from memop.manifests.rbac import (
    LEADER_ELECTION_ROLE,
    LEADER_ELECTION_ROLE_BINDING,
    MANAGER_ROLE,
    MANAGER_ROLE_BINDING,
    METRICS_READER_ROLE,
    MULTI_EXAMPLE_NAMESPACES,
    PROMETHEUS_ACCOUNT,
    base_file_names,
    uninstall_guard_names,
)
from memop.manifests.target import COMMAND, DEPLOYMENT, Target, header, image_repository, to_yaml

# manifests/sharded: replicas splitting the ring (16 shards by default: five or six each), three as
# the issue that first installed it on a node asked: an odd count, so a drain of one leaves two.
SHARDED_REPLICAS = 3
# The longest group --sharding-group takes (memop.cli.options.MAX_GROUP, as ShardingConfig
# checks it): a project with a longer name cannot use its name, the default group.
SHARDING_GROUP_MAX = 40


def _labels(target: Target, comment: bool = True) -> str:
    why = (
        f"# Every object, the CRDs included, carries app.kubernetes.io/part-of={target.name}: list or\n"
        f"# prune the install with -l app.kubernetes.io/part-of={target.name}. Selectors are left alone.\n"
        if comment
        else ""
    )
    return (
        why + "labels:\n"
        "- pairs:\n"
        f"    app.kubernetes.io/part-of: {scalar(target.name)}\n"
        "  includeSelectors: false\n"
    )


def _placed(target: Target) -> str:
    """namespace and namePrefix of an install (or an add-on placed like one)."""
    return f"namespace: {scalar(target.namespace)}\nnamePrefix: {scalar(target.prefix)}\n"


def _components(target: Target) -> str:
    """The webhook Components of an install, when the project serves webhooks."""
    if not webhooks.serves_webhooks(target):
        return ""
    return (
        "# The webhooks, with their certificate from cert-manager (without cert-manager: see\n"
        f"# manifests/{certmanager.SELF_MANAGED}).\n"
        "components:\n- ../webhook\n- ../certmanager\n"
    )


def _delete(api_version: str, kind: str, name: str, namespace: str | None = None) -> str:
    """A patch deleting one object of the resources."""
    where = f"      namespace: {scalar(namespace)}\n" if namespace else ""
    return (
        "- patch: |-\n"
        "    $patch: delete\n"
        f"    apiVersion: {api_version}\n"
        f"    kind: {kind}\n"
        "    metadata:\n"
        f"      name: {scalar(name)}\n" + where
    )


def _env_patch(target: Target, deployment: str, env: str, comment: str) -> str:
    """A strategic-merge patch adding environment variables (``env``, indented YAML) to the
    manager container of ``deployment``."""
    return header(target, comment) + manager_container_patch(target, deployment) + "        env:\n" + env


def _rbac(target: Target) -> str:
    return (
        header(
            target,
            f"{target.name}'s ServiceAccount and permissions, for an install that watches every namespace,"
            " made from its controllers' rules (memop.manifests.rbac); "
            f"`{COMMAND} rbac {target.select}` prints them."
            f" Names get the overlays' namePrefix ({target.prefix}) and namespace ({target.namespace}).",
        )
        + "resources:\n"
        + "".join(f"- {name}\n" for name in base_file_names(target))
    )


def _manager(target: Target) -> str:
    repository = image_repository(target.project.image)
    return header(
        target,
        f"The operator's namespace, Deployment and PodDisruptionBudget, running {target.project.image}."
        f' Point an overlay at your registry with an images entry for the name "{repository}", e.g.',
        f"  cd manifests/default && kustomize edit set image {repository}=registry.example.com/"
        f"{repository.rsplit('/', 1)[-1]}:{target.project.version}",
    ) + ("resources:\n- namespace.yaml\n- manager.yaml\n- pdb.yaml\n")


def _default(target: Target) -> str:
    return (
        header(
            target,
            f"Cluster-wide install: the CRDs, {target.name}'s ServiceAccount with a ClusterRole (every"
            " namespace is watched), the leader-election Role, and the operator Deployment in "
            f"{target.namespace}.",
            "  kubectl apply -k manifests/default",
            f"Objects are named {target.prefix}<name> in namespace {target.namespace} (the CRDs and the"
            " Namespace keep their names). For one or a few namespaces instead, see manifests/namespaced.",
        )
        + _placed(target)
        + _labels(target)
        + "resources:\n- ../crd\n- ../rbac\n- ../manager\n"
        + _components(target)
    )


def _namespaced(target: Target) -> str:
    return (
        header(
            target,
            f"Namespaced install: {target.name} watches only its own namespace ({target.namespace}), with"
            " a Role there instead of the ClusterRole. The CRDs are cluster-scoped all the same:"
            " installing them needs a cluster administrator once.",
            "  kubectl apply -k manifests/namespaced",
            f"Its objects then go in {target.namespace}. To watch other namespaces, see multi/ (a Role"
            " and a RoleBinding in each watched namespace, and WATCH_NAMESPACE listing them).",
        )
        + _placed(target)
        + _labels(target)
        + "resources:\n- ../crd\n- ../rbac\n- ../manager\n"
        "# The ClusterRole's rules as a Role here, and its binding.\n"
        "- role.yaml\n" + _components(target) + "patches:\n"
        "# Nothing cluster-wide for the controllers: drop the ClusterRole and its binding from ../rbac.\n"
        + _delete("rbac.authorization.k8s.io/v1", "ClusterRole", MANAGER_ROLE)
        + _delete("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", MANAGER_ROLE_BINDING)
        + "# Watch the namespace the operator runs in.\n- path: watch_namespace.yaml\n"
        + _webhook_namespaces_entry(target, "its own namespace")
        + "# The namespace runs the custom resources' pods too: baseline enforced, restricted warned.\n"
        "- path: pod_security.yaml\n"
    )


def _namespaced_pod_security(target: Target) -> str:
    """The namespaced install's Namespace labels: its namespace holds the workloads as well."""
    return header(
        target,
        f"In the namespaced install, {target.namespace} is where the custom resources live, so the pods"
        f" {target.name} makes for them (a PodSet's, a MyPod's: the pod spec is the user's) run there"
        " beside the operator. It enforces baseline, the Pod Security level Kubernetes sets for"
        " ordinary workloads, instead of manifests/default's restricted; restricted is still warned"
        " and audited, and the operator's own pods meet it (an apply that warned would say so).",
        "To hold the namespace to restricted, set enforce back to restricted here and give every"
        " custom resource's pod template a restricted securityContext.",
    ) + to_yaml(
        [
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": target.namespace,
                    "labels": {
                        "pod-security.kubernetes.io/enforce": "baseline",
                        "pod-security.kubernetes.io/enforce-version": "latest",
                        "pod-security.kubernetes.io/warn": "restricted",
                        "pod-security.kubernetes.io/warn-version": "latest",
                        "pod-security.kubernetes.io/audit": "restricted",
                        "pod-security.kubernetes.io/audit-version": "latest",
                    },
                },
            }
        ]
    )


WEBHOOK_NAMESPACES = "webhook_namespaces.yaml"


def _webhook_namespaces_entry(target: Target, which: str) -> str:
    """The patches entry of :data:`WEBHOOK_NAMESPACES`, when the project has admission webhooks."""
    if not webhooks.configurations(target):
        return ""
    return (
        f"# The admission webhooks are called for {which} only (a conversion webhook\n"
        "# is the CRD's: it serves every namespace).\n"
        f"- path: {WEBHOOK_NAMESPACES}\n"
    )


def _webhook_namespaces(target: Target, namespaces: list[str], prefix: str, comment: str) -> dict[str, str]:
    """``{path: text}`` of a namespaced install's webhook namespaceSelector patch, if it has one."""
    patches = webhooks.namespace_selector_patches(target, namespaces, prefix)
    return {WEBHOOK_NAMESPACES: to_yaml(patches, header(target, comment))} if patches else {}


def _multi(target: Target) -> str:
    watched = ", ".join(MULTI_EXAMPLE_NAMESPACES)
    return (
        header(
            target,
            f"Namespaced install watching several namespaces (here {watched}; the operator runs in"
            f" {target.namespace}): the cluster-wide install (../../default) without its ClusterRole and"
            " binding, plus a Role and a RoleBinding in each watched namespace, and WATCH_NAMESPACE"
            " listing them.",
            "  kubectl apply -k manifests/namespaced/multi",
            "The watched namespaces must exist first. For your own list, copy this directory (keep the"
            " relative path to manifests/default right) and",
            f"  {COMMAND} roles ns-1 ns-2 {target.select} > roles.yaml",
            "then put the same list, comma-separated, in watch_namespace.yaml"
            + (f" and in {WEBHOOK_NAMESPACES}'s values." if webhooks.configurations(target) else "."),
            "",
            "No namespace or namePrefix here: the base applied them already (a namespace here would"
            " move the Roles out of the namespaces they are for), and roles.yaml has its final names.",
        )
        + "# roles.yaml gets the install's label too (the base's objects have it already).\n"
        + _labels(target, comment=False)
        + "resources:\n- ../../default\n- roles.yaml\n"
        "patches:\n"
        "# Nothing cluster-wide for the controllers.\n"
        + _delete("rbac.authorization.k8s.io/v1", "ClusterRole", target.prefix + MANAGER_ROLE)
        + _delete("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", target.prefix + MANAGER_ROLE_BINDING)
        + "- path: watch_namespace.yaml\n"
        + _webhook_namespaces_entry(target, "the watched namespaces")
    )


def _leader_for_life(target: Target) -> str:
    lock = target.project.leader_election_id
    return (
        header(
            target,
            "Cluster-wide install (as manifests/default) electing its leader for life instead of with a"
            " Lease, as operator-lib's leader.Become does:",
            "  kubectl apply -k manifests/leader-for-life",
            f"The replica that creates the ConfigMap lock {lock} (owned by its own Pod)"
            " leads until that Pod is deleted; the garbage collector then deletes the lock and a standby"
            " takes it. No split brain, but failover waits for the leader Pod's deletion (see memop's"
            " README). The operator gets POD_NAME from the downward API, and a Role for the lock and the"
            " Pods instead of the Lease role.",
        )
        + _placed(target)
        + _labels(target, comment=False)
        + "resources:\n- ../crd\n- ../rbac\n- ../manager\n"
        f"# configmaps get/create/delete and pods get in {target.namespace}.\n"
        "- leader_for_life_role.yaml\n" + _components(target) + "patches:\n"
        "# No Lease: drop the leader-election Role and its binding from ../rbac.\n"
        + _delete("rbac.authorization.k8s.io/v1", "Role", LEADER_ELECTION_ROLE, target.namespace)
        + _delete(
            "rbac.authorization.k8s.io/v1", "RoleBinding", LEADER_ELECTION_ROLE_BINDING, target.namespace
        )
        + "- path: leader_for_life.yaml\n"
    )


def sharding_group(target: Target) -> str:
    """The sharded install's group (its Leases' name prefix and label): the project's name, as
    ``--sharding-group`` defaults to, cut to the length a group may have."""
    return target.name[:SHARDING_GROUP_MAX].rstrip("-")


def _sharded(target: Target) -> str:
    ns, group = target.namespace, sharding_group(target)
    args = manager_deployment(target)["spec"]["template"]["spec"]["containers"][0]["args"]
    arg = f"/spec/template/spec/containers/0/args/{args.index('--leader-elect')}"
    named = (
        [
            f"The project's name is longer than a sharding group may be ({SHARDING_GROUP_MAX} characters):"
            f" the replicas run with --sharding-group={group}."
        ]
        if group != target.name
        else []
    )
    return (
        header(
            target,
            f"Cluster-wide install (as manifests/default) whose {SHARDED_REPLICAS} replicas split the"
            " work instead of electing a leader:",
            "  kubectl apply -k manifests/sharded",
            "Each replica runs with --sharding and reconciles the objects of the shards of the ring (16"
            f" by default, --shards) that Leases in {ns} give it: one Lease per replica"
            f" ({group}-member-<identity>) and one per shard ({group}-shard-<s>-of-<n>), labelled"
            f" sharding.memop.dev/group={group}:",
            f"  kubectl get leases -n {ns} -l sharding.memop.dev/group={group}",
            "Their namespace is the Pod's own (read from its service account): no flag names it.",
            *named,
            "",
            "With the API server's ShardedListAndWatch feature gate on, lists and watches carry a"
            " shardSelector and each replica receives only its share of the objects. Without it every"
            " replica receives every object and drops those outside its shards itself: still correct,"
            " but each replica's cache and watch traffic are the whole cluster's. The mode is logged at"
            " start and exported (memop_sharding_server_side, the Grafana dashboard's Sharding row).",
        )
        + _placed(target)
        + _labels(target, comment=False)
        + "resources:\n- ../crd\n- ../rbac\n- ../manager\n"
        f"# leases get/list/watch/create/update/delete in {ns}: a Role of its own (its header says why).\n"
        "- sharding_role.yaml\n"
        "# patch on what the controllers create, to label what was made before sharding.\n"
        "- sharding_children_role.yaml\n" + _components(target) + "patches:\n"
        "# No leader election: drop its Role and binding from ../rbac.\n"
        + _delete("rbac.authorization.k8s.io/v1", "Role", LEADER_ELECTION_ROLE, ns)
        + _delete("rbac.authorization.k8s.io/v1", "RoleBinding", LEADER_ELECTION_ROLE_BINDING, ns)
        + "# --sharding in place of --leader-elect, the other args kept (the test op fails the build if\n"
        "# ../manager moves --leader-elect).\n"
        "- target:\n"
        "    group: apps\n"
        "    version: v1\n"
        "    kind: Deployment\n"
        f"    name: {scalar(DEPLOYMENT)}\n"
        "  patch: |-\n"
        "    - op: test\n"
        f"      path: {arg}\n"
        "      value: --leader-elect\n"
        "    - op: replace\n"
        f"      path: {arg}\n"
        "      value: --sharding\n"
        + (
            "    - op: add\n"
            "      path: /spec/template/spec/containers/0/args/-\n"
            f"      value: {scalar('--sharding-group=' + group)}\n"
            if named
            else ""
        )
        + f"# {SHARDED_REPLICAS} replicas, and a drain takes one of them at a time.\n"
        "- path: replicas.yaml\n"
        "- path: pdb.yaml\n"
    )


def _sharded_replicas(target: Target) -> str:
    return (
        header(
            target,
            f"{SHARDED_REPLICAS} replicas sharing the work: none stands by, each works on its share of the"
            " ring's shards.",
        )
        + deployment_patch(target)
        + (
            "  # The ring's 16 shards (--shards), five or six each. More replicas, up to --shards, split\n"
            "  # the work finer; a new replica gets its share once the others have drained and released it.\n"
            f"  replicas: {SHARDED_REPLICAS}\n"
        )
    )


def _sharded_disruption_budget(target: Target) -> str:
    return header(
        target,
        "Voluntary disruptions (node drains) take at most one replica at a time: manifests/manager's"
        " value, restated for the sharded install's own reason. A sharded install has no standby: an"
        " evicted replica drains its in-flight reconciles and releases its shards, and the others take"
        " them at their next round.",
    ) + (
        "apiVersion: policy/v1\n"
        "kind: PodDisruptionBudget\n"
        "metadata:\n"
        f"  name: {scalar(DEPLOYMENT)}\n"
        f"  namespace: {scalar(target.namespace)}\n"
        "spec:\n"
        "  # One at a time, so a drain moves one replica's shards (a third of the ring) at a time:\n"
        "  # the two left each take half as much work again and sync the objects of two or three more\n"
        "  # shards, where two replicas evicted at once would land the whole ring on one survivor\n"
        "  # (three times its work and its cache, all relisted together). maxUnavailable rather than\n"
        "  # minAvailable: 2, so that it stays one at a time when replicas changes.\n"
        "  maxUnavailable: 1\n"
    )


def _secure_metrics(target: Target) -> str:
    return (
        header(
            target,
            "Cluster-wide install (manifests/default) with /metrics served over HTTPS, as Kubebuilder"
            " scaffolds it: every scrape must carry a bearer token that the API server authenticates"
            " (TokenReview) and authorises for get on /metrics (SubjectAccessReview).",
            "  kubectl apply -k manifests/secure-metrics",
            "  kubectl apply -k manifests/prometheus-secure    # Service, https monitor, reader binding",
            "The operator then needs two cluster-scoped creates (metrics_auth_role.yaml), and whatever"
            f" scrapes it needs the {target.prefix}{METRICS_READER_ROLE} ClusterRole "
            "(metrics_reader_role.yaml)."
            " The probes stay plain HTTP for the kubelet."
            " The certificate: without --metrics-cert-dir memop generates a self-signed one at start (and"
            " logs a warning). To serve one your Prometheus trusts, mount a kubernetes.io/tls Secret (from"
            " cert-manager, say) and pass its directory:",
            "  args: [..., --metrics-cert-dir=/etc/metrics-certs]",
            "For a namespaced install, use ../namespaced instead of ../default below.",
        )
        + "resources:\n- ../default\n"
        "# The two review permissions and the reader role.\n"
        "- metrics_auth_role.yaml\n- metrics_reader_role.yaml\n"
        + _labels(target, comment=False)
        + "patches:\n"
        "- target:\n"
        "    group: apps\n"
        "    version: v1\n"
        "    kind: Deployment\n"
        f"    name: {scalar(target.deployment)}\n"
        "  patch: |-\n"
        "    - op: add\n"
        "      path: /spec/template/spec/containers/0/args/-\n"
        "      value: --metrics-secure\n"
    )


def _prometheus(target: Target) -> str:
    return (
        header(
            target,
            "Metrics for Prometheus, applied after an install (manifests/default or manifests/namespaced):",
            "  kubectl apply -k manifests/prometheus",
            "A Service in front of the operator's metrics port (8080, plain HTTP), a ServiceMonitor"
            f" (Prometheus Operator) scraping it, and a PrometheusRule with {target.name}'s alert rules"
            " (rules.yaml). Without the Prometheus Operator (no ServiceMonitor or PrometheusRule CRD), take"
            " monitor.yaml and rules.yaml out of resources, scrape the Service your way and load"
            " rules.yaml's spec.groups as a rule file. Keep namespace and namePrefix the same as the"
            " install's: the Service selects the operator's pods there.",
        )
        + _placed(target)
        + _labels(target, comment=False)
        + "resources:\n- service.yaml\n- monitor.yaml\n- rules.yaml\n"
    )


def _prometheus_secure(target: Target) -> str:
    namespace, account = PROMETHEUS_ACCOUNT
    service = f"{target.prefix}controller-manager-metrics-service.{target.namespace}.svc"
    return (
        header(
            target,
            "Metrics for Prometheus when the operator runs with --metrics-secure (manifests/secure-metrics):",
            "  kubectl apply -k manifests/prometheus-secure",
            "The Service of ../prometheus and a ServiceMonitor scraping it over HTTPS with Prometheus's own"
            " ServiceAccount token, which the operator checks with a TokenReview and a SubjectAccessReview;"
            " that account is granted get on /metrics by metrics_reader_role_binding.yaml (kube-prometheus's"
            f" {namespace}/{account}: bind {target.prefix}{METRICS_READER_ROLE} to yours instead).",
            "insecureSkipVerify: memop's default certificate is self-signed. With --metrics-cert-dir and a"
            " certificate from a CA Prometheus trusts, replace it with tlsConfig.ca and serverName"
            f" ({service}).",
        )
        + "resources:\n- ../prometheus\n- metrics_reader_role_binding.yaml\n"
        + _labels(target, comment=False)
        + "patches:\n"
        "- target:\n"
        "    group: monitoring.coreos.com\n"
        "    version: v1\n"
        "    kind: ServiceMonitor\n"
        f"    name: {scalar(target.prefix + METRICS_MONITOR)}\n"
        "  patch: |-\n"
        "    - op: replace\n"
        "      path: /spec/endpoints/0/scheme\n"
        "      value: https\n"
        "    - op: add\n"
        "      path: /spec/endpoints/0/bearerTokenFile\n"
        "      value: /var/run/secrets/kubernetes.io/serviceaccount/token\n"
        "    - op: add\n"
        "      path: /spec/endpoints/0/tlsConfig\n"
        "      value:\n"
        "        insecureSkipVerify: true\n"
    )


def _grafana(target: Target) -> str:
    return (
        header(
            target,
            f"{target.name}'s Grafana dashboard, for the Grafana dashboard sidecar (kube-prometheus-stack's,"
            ' or any that loads ConfigMaps labelled grafana_dashboard: "1"), applied after an install:',
            "  kubectl apply -k manifests/grafana",
            f"{dashboard_file(target)} is generated too (do not edit it by hand); import it into any"
            " Grafana through Dashboards > New > Import just as well. The sidecar must search"
            f" {target.namespace} (kube-prometheus-stack: grafana.sidecar.dashboards.searchNamespace=ALL),"
            " or change the namespace below to the one it searches. The panels read Prometheus's data"
            ' source chosen in the dashboard\'s "Data source" variable, scraped as manifests/prometheus'
            " does.",
        )
        + _placed(target)
        + _labels(target, comment=False)
        + "configMapGenerator:\n"
        "- name: grafana-dashboard\n"
        "  files:\n"
        f"  - {dashboard_file(target)}\n"
        "  options:\n"
        "    disableNameSuffixHash: true\n"
        "    labels:\n"
        '      grafana_dashboard: "1"\n'
        f"      app.kubernetes.io/name: {scalar(target.name)}\n"
    )


def overlay_files(target: Target) -> dict[str, str]:
    """Every kustomization and patch of the project's manifests: path under ``manifests/`` -> text."""
    # The namespaced install guards its Role and RoleBinding; multi's Roles are in the watched
    # namespaces, which its uninstall does not delete: no guard there.
    service_account, role_name, binding_name = uninstall_guard_names(target)
    guard = f"{service_account},Role/{role_name},RoleBinding/{binding_name}"
    env_namespaced_guard = f"        - name: UNINSTALL_GUARD\n          value: {scalar(guard)}\n"
    env_no_guard = '        - name: UNINSTALL_GUARD\n          value: ""\n'
    env_namespace = (
        "        - name: WATCH_NAMESPACE\n"
        "          valueFrom:\n"
        "            fieldRef:\n"
        "              fieldPath: metadata.namespace\n"
    ) + env_namespaced_guard
    env_multi = (
        f"        - name: WATCH_NAMESPACE\n          value: {scalar(','.join(MULTI_EXAMPLE_NAMESPACES))}\n"
    ) + env_no_guard
    env_leader_for_life = (
        "        - name: LEADER_ELECTION_MODE\n"
        "          value: leader-for-life\n"
        "        - name: POD_NAME\n"
        "          valueFrom:\n"
        "            fieldRef:\n"
        "              fieldPath: metadata.name\n"
    )
    files = {
        "rbac/kustomization.yaml": _rbac(target),
        "manager/kustomization.yaml": _manager(target),
        "default/kustomization.yaml": _default(target),
        "namespaced/kustomization.yaml": _namespaced(target),
        "namespaced/pod_security.yaml": _namespaced_pod_security(target),
        "namespaced/watch_namespace.yaml": _env_patch(
            target,
            DEPLOYMENT,
            env_namespace,
            "The operator watches the namespace its pod runs in (--watch-namespace / WATCH_NAMESPACE).",
        ),
        "namespaced/multi/kustomization.yaml": _multi(target),
        "namespaced/multi/watch_namespace.yaml": _env_patch(
            target,
            target.deployment,
            env_multi,
            "The watched namespaces, comma-separated: each needs its Role and RoleBinding (roles.yaml).",
        ),
        "leader-for-life/kustomization.yaml": _leader_for_life(target),
        "leader-for-life/leader_for_life.yaml": _env_patch(
            target,
            DEPLOYMENT,
            env_leader_for_life,
            "--leader-elect (from manifests/manager) with leader for life: the lock is owned by the Pod "
            "POD_NAME names, which the downward API fills in.",
        ),
        "secure-metrics/kustomization.yaml": _secure_metrics(target),
        "sharded/kustomization.yaml": _sharded(target),
        "sharded/replicas.yaml": _sharded_replicas(target),
        "sharded/pdb.yaml": _sharded_disruption_budget(target),
        "prometheus/kustomization.yaml": _prometheus(target),
        "prometheus-secure/kustomization.yaml": _prometheus_secure(target),
        "grafana/kustomization.yaml": _grafana(target),
    }
    for directory, namespaces, prefix in (
        ("namespaced", [target.namespace], ""),
        ("namespaced/multi", list(MULTI_EXAMPLE_NAMESPACES), target.prefix),
    ):
        for name, text in _webhook_namespaces(
            target,
            namespaces,
            prefix,
            "The admission webhooks are called for objects in the watched namespaces only, named by"
            f" the label every namespace has ({webhooks.NAMESPACE_NAME_LABEL}): the same list as"
            " WATCH_NAMESPACE's. Without it, with failurePolicy Fail, an operator that is down would"
            " refuse writes in namespaces it was never given.",
        ).items():
            files[f"{directory}/{name}"] = text
    files.update(certmanager.self_managed_files(target, _labels(target, comment=False), _placed(target)))
    return files
