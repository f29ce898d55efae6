"""batch/v1 Jobs and CronJobs as kube-apiserver v1.36 serves them.

A Job: ``SetDefaults_Job`` (completions and parallelism 1 when both are unset, backoffLimit 6,
NonIndexed completion, not suspended, ``podReplacementPolicy`` TerminatingOrFailed, or Failed with
a pod failure policy, ``manualSelector: false``, the Job's labels its template's when it has
none), then the strategy's generated selector: the template gets the
``batch.kubernetes.io/job-name``/``job-name`` and ``batch.kubernetes.io/controller-uid``/
``controller-uid`` labels and the selector matches the controller uid. A Job whose labels were
defaulted gets the generated labels too (Go shares the template's map). Validation as
``ValidateJob`` where operators meet it: the template's ``restartPolicy`` (OnFailure or Never,
and a pod template defaults it to Always), non-negative counts, the selector, and on update an
immutable selector, template (while the Job is not suspended) and completion mode. Selectable
field: ``status.successful``.

A CronJob: ``SetDefaults_CronJob`` (Allow, not suspended, history limits 3 and 1), its job
template's pod defaults, and ``ValidateCronJob``: a name of at most 52 characters, a schedule
robfig/cron parses (:mod:`memop.testing.kinds.cron`) without ``TZ=``, a known time zone, the
concurrency policy, and the job template as a Job's spec.

Both have a status subresource and count generations.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Mapping
from typing import Any

from memop.runtime.cache.labels import InvalidSelectorError, Selector
from memop.testing.apiserver.objects import (
    JsonDict,
    invalid,
    not_supported,
    required,
    validate_label_selector,
)
from memop.testing.apiserver.resources import ResourceType
from memop.testing.apiserver.schema import FieldError, go_json
from memop.testing.apiserver.strategy import Kind
from memop.testing.kinds import cron
from memop.testing.kinds.builtins import (
    BuiltinStrategy,
    _decoding,
    _immutable_selector,
    check_integers,
    default_pod_template,
    validate_containers,
)

JOBS = ResourceType("batch", "v1", "jobs", "Job", True, "job", has_status=True, categories=("all",))
CRON_JOBS = ResourceType(
    "batch", "v1", "cronjobs", "CronJob", True, "cronjob", ("cj",), has_status=True, categories=("all",)
)
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
_MAX_INT32 = 2**31 - 1
_JOB_INTEGERS = (
    (
        "JobSpec",
        "spec",
        ("parallelism", "completions", "backoffLimit", "backoffLimitPerIndex", "maxFailedIndexes"),
        "int32",
    ),
    ("JobSpec", "spec", ("activeDeadlineSeconds",), "int64"),
)
_CRON_JOB_INTEGERS = (
    ("CronJobSpec", "spec", ("successfulJobsHistoryLimit", "failedJobsHistoryLimit"), "int32"),
    ("CronJobSpec", "spec", ("startingDeadlineSeconds",), "int64"),
)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --- Job -------------------------------------------------------------------------------------------


def default_job(obj: JsonDict) -> None:
    """``SetDefaults_Job`` (JobPodReplacementPolicy is GA) and the pod template's defaults."""
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    check_integers(obj, _JOB_INTEGERS)
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    if spec.get("parallelism") is None:
        spec["parallelism"] = 1
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = _MAX_INT32 if spec.get("backoffLimitPerIndex") is not None else 6
    template = spec.setdefault("template", {})
    labels = _map(template).get("metadata", {}).get("labels") if isinstance(template, dict) else None
    meta = obj.setdefault("metadata", {})
    if labels is not None and not meta.get("labels"):
        # Go assigns the template's map itself: the labels generateSelector adds to the template
        # on create land in the Job's labels too (kube-apiserver v1.36.2 answers with them).
        # prepare_create copies it once the selector is generated.
        meta["labels"] = labels
    if spec.get("completionMode") is None:
        spec["completionMode"] = "NonIndexed"
    if spec.get("suspend") is None:
        spec["suspend"] = False
    failure_policy = spec.get("podFailurePolicy")
    for rule in _map(failure_policy).get("rules") or ():
        for pattern in _map(rule).get("onPodConditions") or ():
            if isinstance(pattern, dict) and not pattern.get("status"):
                pattern["status"] = "True"
    if spec.get("podReplacementPolicy") is None:
        spec["podReplacementPolicy"] = "Failed" if failure_policy is not None else "TerminatingOrFailed"
    if spec.get("manualSelector") is None:
        spec["manualSelector"] = False
    default_pod_template(template)


def generate_selector(obj: JsonDict) -> None:
    """The job strategy's ``generateSelector``: labels naming the Job and its uid on the template
    (the user's own values kept), and a selector on the uid."""
    meta = obj["metadata"]
    spec = obj.setdefault("spec", {})
    template = spec.setdefault("template", {})
    template_meta = template.setdefault("metadata", {})
    labels = template_meta.get("labels")
    if not isinstance(labels, dict):  # in place otherwise: the Job's labels may be this map
        labels = template_meta["labels"] = {}
    for key in (LEGACY_JOB_NAME_LABEL, JOB_NAME_LABEL):
        labels.setdefault(key, str(meta.get("name") or ""))
    for key in (LEGACY_CONTROLLER_UID_LABEL, CONTROLLER_UID_LABEL):
        labels.setdefault(key, str(meta.get("uid") or ""))
    selector = spec.get("selector")
    selector = spec["selector"] = dict(selector) if isinstance(selector, dict) else {}
    match = selector.get("matchLabels")
    match = selector["matchLabels"] = dict(match) if isinstance(match, dict) else {}
    match.setdefault(CONTROLLER_UID_LABEL, str(meta.get("uid") or ""))


def _non_negative(spec: Mapping[str, Any], path: str, *keys: str) -> list[FieldError]:
    return [
        invalid(f"{path}.{key}", spec[key], "must be greater than or equal to 0")
        for key in keys
        if _int(spec.get(key)) and spec[key] < 0
    ]


def job_spec_errors(spec: Mapping[str, Any], path: str, *, template_only: bool = False) -> list[FieldError]:
    """``validateJobSpec`` at ``path`` (``spec`` of a Job, ``spec.jobTemplate.spec`` of a CronJob,
    where no selector is required)."""
    # A Job's activeDeadlineSeconds may be 0 (a pod's may not), checked in this order.
    errs = _non_negative(
        spec,
        path,
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
    )
    selector = spec.get("selector")
    template = _map(spec.get("template"))
    if selector is None:
        if spec.get("manualSelector") is True and not template_only:
            # LabelSelectorAsSelector(nil) is labels.Nothing(): no template matches it either.
            labels = _map(_map(template.get("metadata")).get("labels"))
            errs.append(required(f"{path}.selector"))
            errs.append(
                invalid(
                    f"{path}.template.metadata.labels",
                    dict(labels),
                    "`selector` does not match template `labels`",
                )
            )
    else:
        errs.extend(validate_label_selector(selector, f"{path}.selector"))
        try:
            compiled = Selector.from_label_selector(selector)
        except InvalidSelectorError:
            compiled = None
        labels = _map(_map(template.get("metadata")).get("labels"))
        if compiled is not None and not compiled.matches(labels):
            errs.append(
                invalid(
                    f"{path}.template.metadata.labels",
                    dict(labels),
                    "`selector` does not match template `labels`",
                )
            )
    mode = spec.get("completionMode")
    if mode is not None and mode not in ("NonIndexed", "Indexed"):
        errs.append(not_supported(f"{path}.completionMode", mode, ["NonIndexed", "Indexed"]))
    pod_spec = template.get("spec")
    errs.extend(validate_containers(pod_spec, f"{path}.template.spec"))
    restart = _map(pod_spec).get("restartPolicy")
    if restart in ("Always", "", None):  # Always: what a template defaults an unset one to
        errs.append(required(f"{path}.template.spec.restartPolicy", 'valid values: "OnFailure", "Never"'))
    elif restart not in ("OnFailure", "Never"):
        errs.append(not_supported(f"{path}.template.spec.restartPolicy", restart, ["OnFailure", "Never"]))
    return errs


def _immutable(path: str, new: Any, old: Any) -> list[FieldError]:
    if new == old:
        return []
    return [invalid(path, new, "field is immutable", raw_value=go_json(new, sort_keys=False))]


class JobStrategy(BuiltinStrategy):
    unconditional_update = True
    strategic_merge = True
    times = (
        ("status", "startTime"),
        ("status", "completionTime"),
        ("status", "conditions", "*", "lastProbeTime"),
        ("status", "conditions", "*", "lastTransitionTime"),
    )

    def field_labels(self) -> Mapping[str, str]:
        return {"status.successful": "status.succeeded"}

    def field_label_defaults(self) -> Mapping[str, str]:
        return {"status.successful": "0"}

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        _decoding(rtype, lambda: default_job(obj))
        return obj

    def initial_status(self, obj: JsonDict) -> Any:
        return {}

    def prepare_create(self, obj: JsonDict, rtype: ResourceType) -> None:
        if _map(obj.get("spec")).get("manualSelector") is not True:
            generate_selector(obj)
        meta = obj["metadata"]
        if isinstance(meta.get("labels"), dict):  # no map shared with the template once stored
            meta["labels"] = dict(meta["labels"])

    def bumps_generation(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> bool:
        return new.get("spec") != old.get("spec")

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        return job_spec_errors(_map(obj.get("spec")), "spec")

    def validate_update(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> list[FieldError]:
        new_spec, old_spec = _map(new.get("spec")), _map(old.get("spec"))
        errs = job_spec_errors(new_spec, "spec")
        errs.extend(_immutable_selector(new, old))
        # The template may change only while the Job is suspended and has not started.
        started = _map(old.get("status")).get("startTime") is not None
        if not (new_spec.get("suspend") is True and not started):
            template = new_spec.get("template")
            if template != old_spec.get("template"):
                errs.extend(_immutable("spec.template", template, old_spec.get("template")))
        errs.extend(
            _immutable("spec.completionMode", new_spec.get("completionMode"), old_spec.get("completionMode"))
        )
        if new_spec.get("completionMode") != "Indexed":
            errs.extend(
                _immutable("spec.completions", new_spec.get("completions"), old_spec.get("completions"))
            )
        return errs


# --- CronJob ---------------------------------------------------------------------------------------


def default_cron_job(obj: JsonDict) -> None:
    """``SetDefaults_CronJob``; the job template gets its pod template's defaults only."""
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    check_integers(obj, _CRON_JOB_INTEGERS)
    if not spec.get("concurrencyPolicy"):
        spec["concurrencyPolicy"] = "Allow"
    if spec.get("suspend") is None:
        spec["suspend"] = False
    if spec.get("successfulJobsHistoryLimit") is None:
        spec["successfulJobsHistoryLimit"] = 3
    if spec.get("failedJobsHistoryLimit") is None:
        spec["failedJobsHistoryLimit"] = 1
    job_template = spec.setdefault("jobTemplate", {})
    if isinstance(job_template, dict):
        job_template.setdefault("metadata", {})
        job_spec = job_template.setdefault("spec", {})
        if isinstance(job_spec, dict):
            default_pod_template(job_spec.setdefault("template", {}))


def _schedule_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    schedule = spec.get("schedule")
    if not schedule:
        return [required("spec.schedule")]
    errs: list[FieldError] = []
    try:
        cron.parse(str(schedule))
    except cron.CronError as error:
        errs.append(invalid("spec.schedule", schedule, str(error)))
    if "TZ" in str(schedule):
        errs.append(
            invalid(
                "spec.schedule", schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
            )
        )
    zone = spec.get("timeZone")
    if zone is not None:
        if not zone:
            errs.append(invalid("spec.timeZone", zone, "timeZone must be nil or non-empty string"))
        elif not _known_zone(str(zone)):
            errs.append(invalid("spec.timeZone", zone, f"unknown time zone {zone}"))
    return errs


def _known_zone(name: str) -> bool:
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return True


def _cron_job_errors(obj: Mapping[str, Any]) -> list[FieldError]:
    spec = _map(obj.get("spec"))
    errs: list[FieldError] = []
    name = str(_map(obj.get("metadata")).get("name") or "")
    if len(name) > 52:
        errs.append(invalid("metadata.name", name, "must be no more than 52 characters"))
    errs.extend(_schedule_errors(spec))
    policy = spec.get("concurrencyPolicy")
    if policy not in ("Allow", "Forbid", "Replace"):
        errs.append(not_supported("spec.concurrencyPolicy", policy, ["Allow", "Forbid", "Replace"]))
    errs.extend(
        _non_negative(
            spec, "spec", "startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit"
        )
    )
    job_spec = _map(_map(spec.get("jobTemplate")).get("spec"))
    if job_spec.get("manualSelector") is True:
        errs.append(not_supported("spec.jobTemplate.spec.manualSelector", True, ["nil", "false"]))
    errs.extend(job_spec_errors(job_spec, "spec.jobTemplate.spec", template_only=True))
    return errs


class CronJobStrategy(BuiltinStrategy):
    unconditional_update = True
    strategic_merge = True
    times = (("status", "lastScheduleTime"), ("status", "lastSuccessfulTime"))

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        _decoding(rtype, lambda: default_cron_job(obj))
        return obj

    def initial_status(self, obj: JsonDict) -> Any:
        return {}

    def bumps_generation(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> bool:
        return new.get("spec") != old.get("spec")

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        return _cron_job_errors(obj)


KINDS: tuple[Kind, ...] = (
    Kind(JOBS, JobStrategy()),
    Kind(CRON_JOBS, CronJobStrategy()),
)
