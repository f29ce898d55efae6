"""StatefulSets, DaemonSets, Jobs and CronJobs over HTTP, as kube-apiserver v1.36 answers: their
defaults (``SetDefaults_*`` of apps/v1 and batch/v1), a Job's generated selector, the status
subresources, and the validation errors operators run into, each the real server's message."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.conftest import Http

APPS = "/apis/apps/v1"
BATCH = "/apis/batch/v1"


def path(group: str, ns: str, plural: str, name: str = "") -> str:
    return f"{group}/namespaces/{ns}/{plural}" + (f"/{name}" if name else "")


def template(restart: str | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}
    if restart is not None:
        spec["restartPolicy"] = restart
    return {"metadata": {"labels": labels if labels is not None else {"app": "web"}}, "spec": spec}


def stateful_set(name: str, **spec: Any) -> dict[str, Any]:
    body = {"selector": {"matchLabels": {"app": "web"}}, "serviceName": name, "template": template(), **spec}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name}, "spec": body}


def job(name: str, restart: str | None = "Never", **spec: Any) -> dict[str, Any]:
    body = {"template": template(restart), **spec}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": body}


def cron_job(
    name: str, schedule: str = "*/5 * * * *", restart: str | None = "OnFailure", **spec: Any
) -> dict[str, Any]:
    body = {"schedule": schedule, "jobTemplate": {"spec": {"template": template(restart)}}, **spec}
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name}, "spec": body}


def invalid(kind: str, name: str, *errors: str) -> str:
    joined = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return f'{kind} "{name}" is invalid: {joined}'


# --- StatefulSet ---


async def test_a_stateful_set_gets_its_defaults_and_an_empty_status(http: Http, namespace: str) -> None:
    body = stateful_set("db")
    body["spec"]["volumeClaimTemplates"] = [
        {
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1024Mi"}}},
        }
    ]
    created = await http.post(path(APPS, namespace, "statefulsets"), body)
    assert created.status == 201, created.body
    spec = created.body["spec"]
    assert spec["replicas"] == 1
    assert spec["podManagementPolicy"] == "OrderedReady"
    assert spec["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert spec["revisionHistoryLimit"] == 10
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    assert spec["template"]["spec"]["restartPolicy"] == "Always"
    claim = spec["volumeClaimTemplates"][0]
    assert claim["spec"]["volumeMode"] == "Filesystem"
    assert claim["spec"]["resources"] == {"requests": {"storage": "1Gi"}}
    assert claim["status"] == {"phase": "Pending"}
    assert created.body["status"] == {"replicas": 0, "availableReplicas": 0}
    assert created.body["metadata"]["generation"] == 1
    # An explicit RollingUpdate type without rollingUpdate gets no partition (only an empty type does).
    explicit = await http.post(
        path(APPS, namespace, "statefulsets"),
        stateful_set("explicit", updateStrategy={"type": "RollingUpdate"}),
    )
    assert explicit.body["spec"]["updateStrategy"] == {"type": "RollingUpdate"}
    scale = await http.get(path(APPS, namespace, "statefulsets", "db") + "/scale")
    assert scale.body["spec"] == {"replicas": 1}


async def test_a_stateful_set_refuses_a_bad_selector_and_forbidden_updates(
    http: Http, namespace: str
) -> None:
    mismatch = stateful_set("mismatch")
    mismatch["spec"]["template"] = template(labels={"app": "other"})
    reply = await http.post(path(APPS, namespace, "statefulsets"), mismatch)
    assert reply.status == 422
    assert reply.body["message"] == invalid(
        "StatefulSet.apps",
        "mismatch",
        'spec.template.metadata.labels: Invalid value: {"app":"other"}: `selector` does not match template '
        "`labels`",
    )
    never = stateful_set("never")
    never["spec"]["template"] = template("Never")
    reply = await http.post(path(APPS, namespace, "statefulsets"), never)
    assert reply.body["message"] == invalid(
        "StatefulSet.apps",
        "never",
        'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"',
    )
    assert (await http.post(path(APPS, namespace, "statefulsets"), stateful_set("db"))).status == 201
    changed = await http.patch(
        path(APPS, namespace, "statefulsets", "db"), {"spec": {"serviceName": "other"}}
    )
    assert changed.status == 422
    assert changed.body["message"] == invalid(
        "StatefulSet.apps",
        "db",
        "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', "
        "'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and "
        "'minReadySeconds' are forbidden",
    )
    scaled = await http.patch(path(APPS, namespace, "statefulsets", "db"), {"spec": {"replicas": 3}})
    assert scaled.status == 200
    assert scaled.body["metadata"]["generation"] == 2


# --- DaemonSet ---


async def test_a_daemon_set_gets_its_defaults_and_counts_template_generations(
    http: Http, namespace: str
) -> None:
    body = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template()},
    }
    created = await http.post(path(APPS, namespace, "daemonsets"), body)
    assert created.status == 201, created.body
    assert created.body["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
    }
    assert created.body["spec"]["revisionHistoryLimit"] == 10
    assert created.body["metadata"]["annotations"] == {"deprecated.daemonset.template.generation": "1"}
    assert created.body["status"] == {
        "currentNumberScheduled": 0,
        "numberMisscheduled": 0,
        "desiredNumberScheduled": 0,
        "numberReady": 0,
    }
    new_image = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}
    updated = await http.patch(path(APPS, namespace, "daemonsets", "agent"), new_image)
    assert updated.body["metadata"]["annotations"] == {"deprecated.daemonset.template.generation": "2"}
    assert updated.body["metadata"]["generation"] == 2
    moved = await http.patch(
        path(APPS, namespace, "daemonsets", "agent"),
        {"spec": {"selector": {"matchLabels": {"app": "web", "tier": "x"}}}},
    )
    assert moved.status == 422
    assert moved.body["message"] == (
        'DaemonSet.apps "agent" is invalid: [spec.selector: Invalid value: '
        '{"matchLabels":{"app":"web","tier":"x"}}: field is immutable, spec.template.metadata.labels: '
        'Invalid value: {"app":"web"}: `selector` does not match template `labels`]'
    )


# --- Job ---


async def test_a_job_gets_its_defaults_and_a_generated_selector(http: Http, namespace: str) -> None:
    body = job("once")
    created = await http.post(path(BATCH, namespace, "jobs"), body)
    assert created.status == 201, created.body
    uid = created.body["metadata"]["uid"]
    spec = created.body["spec"]
    assert {
        k: spec[k] for k in ("completions", "parallelism", "backoffLimit", "completionMode", "suspend")
    } == {
        "completions": 1,
        "parallelism": 1,
        "backoffLimit": 6,
        "completionMode": "NonIndexed",
        "suspend": False,
    }
    assert spec["podReplacementPolicy"] == "TerminatingOrFailed"
    assert spec["manualSelector"] is False
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert spec["template"]["metadata"]["labels"] == {
        "app": "web",
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "once",
        "controller-uid": uid,
        "job-name": "once",
    }
    # The Job's own labels, defaulted from the template's, are the template's map in Go: with the
    # generated labels (kube-apiserver v1.36.2 answers so). Labels a client sets stay as set.
    assert created.body["metadata"]["labels"] == spec["template"]["metadata"]["labels"]
    labelled = job("labelled")
    labelled["metadata"]["labels"] = {"app": "web"}
    explicit = await http.post(path(BATCH, namespace, "jobs"), labelled)
    assert explicit.status == 201, explicit.body
    assert explicit.body["metadata"]["labels"] == {"app": "web"}
    assert created.body["status"] == {}
    parallel = await http.post(path(BATCH, namespace, "jobs"), job("parallel", parallelism=3))
    assert "completions" not in parallel.body["spec"]
    assert parallel.body["spec"]["parallelism"] == 3
    with_policy = job(
        "policy",
        podFailurePolicy={"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
    )
    reply = await http.post(path(BATCH, namespace, "jobs"), with_policy)
    assert reply.status == 201, reply.body
    assert reply.body["spec"]["podReplacementPolicy"] == "Failed"
    assert reply.body["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"] == [
        {"type": "DisruptionTarget", "status": "True"}
    ]
    # status.successful reads 0 for a Job nothing succeeded in yet (strconv.Itoa of the zero int).
    selected = await http.get(path(BATCH, namespace, "jobs"), query={"fieldSelector": "status.successful=0"})
    assert sorted(item["metadata"]["name"] for item in selected.body["items"]) == [
        "labelled",
        "once",
        "parallel",
        "policy",
    ]


async def test_a_job_needs_on_failure_or_never_and_keeps_its_template(http: Http, namespace: str) -> None:
    reply = await http.post(path(BATCH, namespace, "jobs"), job("always", restart=None))
    assert reply.status == 422
    # kube-apiserver v1.36.2 calls the template's defaulted Always missing.
    assert reply.body["message"] == invalid(
        "Job.batch",
        "always",
        'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"',
    )
    negative = await http.post(
        path(BATCH, namespace, "jobs"), job("negative", backoffLimit=-1, activeDeadlineSeconds=-1)
    )
    assert negative.body["message"] == invalid(
        "Job.batch",
        "negative",
        "spec.activeDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0",
        "spec.backoffLimit: Invalid value: -1: must be greater than or equal to 0",
    )
    # A Job's deadline may be 0, as kube-apiserver v1.36.2 accepts (a pod's may not).
    zero = await http.post(path(BATCH, namespace, "jobs"), job("zero", activeDeadlineSeconds=0))
    assert zero.status == 201, zero.body
    manual = await http.post(path(BATCH, namespace, "jobs"), job("manual", manualSelector=True))
    assert manual.body["message"] == invalid(
        "Job.batch",
        "manual",
        "spec.selector: Required value",
        # no selector matches nothing, the template neither (as kube-apiserver v1.36.2 adds)
        'spec.template.metadata.labels: Invalid value: {"app":"web"}: `selector` does not match template '
        "`labels`",
    )
    assert (await http.post(path(BATCH, namespace, "jobs"), job("run"))).status == 201
    new_image = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}
    changed = await http.patch(path(BATCH, namespace, "jobs", "run"), new_image)
    assert changed.status == 422
    assert changed.body["message"].startswith('Job.batch "run" is invalid: spec.template: Invalid value: ')
    assert changed.body["message"].endswith(": field is immutable")


# --- CronJob ---


async def test_a_cron_job_gets_its_defaults(http: Http, namespace: str) -> None:
    created = await http.post(path(BATCH, namespace, "cronjobs"), cron_job("nightly", "@daily"))
    assert created.status == 201, created.body
    spec = created.body["spec"]
    assert {
        k: spec[k]
        for k in ("concurrencyPolicy", "suspend", "successfulJobsHistoryLimit", "failedJobsHistoryLimit")
    } == {
        "concurrencyPolicy": "Allow",
        "suspend": False,
        "successfulJobsHistoryLimit": 3,
        "failedJobsHistoryLimit": 1,
    }
    # The job template gets its pod template's defaults, not a Job's.
    job_spec = spec["jobTemplate"]["spec"]
    assert "backoffLimit" not in job_spec
    assert job_spec["template"]["spec"]["terminationGracePeriodSeconds"] == 30
    assert created.body["status"] == {}


async def test_a_cron_job_schedule_and_template_are_checked(http: Http, namespace: str) -> None:
    cases = {
        "fields": (
            "* * *",
            'spec.schedule: Invalid value: "* * *": expected exactly 5 fields, found 3: [* * *]',
        ),
        "range": (
            "61 * * * *",
            'spec.schedule: Invalid value: "61 * * * *": end of range (61) above maximum (59): 61',
        ),
        "descriptor": ("@often", 'spec.schedule: Invalid value: "@often": unrecognized descriptor: @often'),
        "tz": (
            "TZ=UTC 0 * * * *",
            'spec.schedule: Invalid value: "TZ=UTC 0 * * * *": cannot use TZ or CRON_TZ in schedule, use '
            "timeZone field instead",
        ),
    }
    for name, (schedule, message) in cases.items():
        reply = await http.post(path(BATCH, namespace, "cronjobs"), cron_job(name, schedule))
        assert reply.status == 422, (name, reply.body)
        assert reply.body["message"] == invalid("CronJob.batch", name, message)
    always = await http.post(path(BATCH, namespace, "cronjobs"), cron_job("always", restart=None))
    assert always.body["message"] == invalid(
        "CronJob.batch",
        "always",
        "spec.jobTemplate.spec.template.spec.restartPolicy: Required value: valid values: "
        '"OnFailure", "Never"',
    )
    long_name = "c" * 53
    reply = await http.post(path(BATCH, namespace, "cronjobs"), cron_job(long_name))
    assert reply.body["message"] == invalid(
        "CronJob.batch",
        long_name,
        f'metadata.name: Invalid value: "{long_name}": must be no more than 52 characters',
    )
    zone = await http.post(path(BATCH, namespace, "cronjobs"), cron_job("zone", timeZone="Mars/Olympus"))
    assert zone.body["message"] == invalid(
        "CronJob.batch",
        "zone",
        'spec.timeZone: Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus',
    )
    ok = await http.post(
        path(BATCH, namespace, "cronjobs"), cron_job("berlin", "30 2 * * 1-5", timeZone="Europe/Berlin")
    )
    assert ok.status == 201, ok.body
