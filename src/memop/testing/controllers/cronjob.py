"""The CronJob controller, simulated: Jobs on the schedule, by the simulation's clock.

At each activation of ``spec.schedule`` (in ``spec.timeZone``, UTC by default; the clock is the
simulation's, so a test with a :class:`~memop.runtime.util.clock.FakeClock` advances it) a
CronJob that is not suspended gets a Job ``<name>-<minutes since the epoch of the activation>``
from its job template, with a controller ownerReference and the
``batch.kubernetes.io/cronjob-scheduled-timestamp`` annotation. Missed activations (the clock
jumped, the CronJob was suspended) start only the latest one, within ``startingDeadlineSeconds``
when set. ``concurrencyPolicy`` Forbid skips an activation while a Job is active, Replace deletes
the active ones first. The status keeps ``active`` (references to the Jobs not finished),
``lastScheduleTime`` and ``lastSuccessfulTime``; finished Jobs beyond
``successfulJobsHistoryLimit``/``failedJobsHistoryLimit`` are deleted, oldest first.
"""

from __future__ import annotations

import datetime
import zoneinfo
from collections.abc import Mapping
from typing import Any

from memop.runtime.util.clock import Clock
from memop.testing.apiserver.errors import ApiError
from memop.testing.apiserver.store import Store, StoreEvent
from memop.testing.controllers.cache import ObjectCache
from memop.testing.controllers.common import (
    Obj,
    WorkLoop,
    being_deleted,
    is_controlled_by,
    meta,
    new_controller_ref,
    owner_key,
    parse_rfc3339,
    rfc3339,
    status_body,
)
from memop.testing.controllers.job import job_finished
from memop.testing.kinds import cron

Key = tuple[str, str]  # (namespace, name)
SCHEDULED_TIMESTAMP = "batch.kubernetes.io/cronjob-scheduled-timestamp"
_MAX_MISSED = 100  # the real controller gives up counting missed activations there too


def _zone(cron_job: Mapping[str, Any]) -> datetime.tzinfo:
    name = (cron_job.get("spec") or {}).get("timeZone")
    try:
        return zoneinfo.ZoneInfo(name) if name else datetime.UTC
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return datetime.UTC


def latest_activation(
    schedule: cron.Schedule, earliest: datetime.datetime, now: datetime.datetime
) -> tuple[datetime.datetime | None, datetime.datetime]:
    """The latest activation in (earliest, now], if any, and the first one after ``now``."""
    latest = None
    when = schedule.next(earliest)
    for _ in range(_MAX_MISSED):
        if when > now:
            break
        latest = when
        when = schedule.next(when)
    else:
        while when <= now:  # too many missed: jump on without counting them
            latest, when = when, schedule.next(when)
    return latest, when


class CronJobController:
    """Starts every CronJob's Jobs on its schedule (see the module docstring)."""

    def __init__(self, store: Store, cache: ObjectCache, *, clock: Clock) -> None:
        self._store = store
        self._cache = cache
        self._clock = clock
        self._cron_jobs = store.resource("batch", "v1", "cronjobs")
        self._jobs = store.resource("batch", "v1", "jobs")
        self.loop: WorkLoop[Key] = WorkLoop("cronjob", self._sync, clock=clock, workers=1)

    def on_event(self, event: StoreEvent) -> None:
        key = owner_key(event, ("batch", "CronJob"), ("batch", "Job"))
        if key is not None:
            self.loop.add(key)

    def _sync(self, key: Key) -> float | None:
        ns, name = key
        cron_job = self._cache.get(self._cron_jobs, ns, name)
        if cron_job is None or being_deleted(cron_job):
            return None
        spec = cron_job.get("spec") or {}
        uid = meta(cron_job)["uid"]
        jobs = [
            job
            for rtype, job in self._cache.dependents(uid)
            if rtype.group == "batch" and rtype.kind == "Job" and is_controlled_by(job, uid)
        ]
        status: Obj = dict(cron_job.get("status") or {})
        active = [j for j in jobs if not job_finished(j) and not being_deleted(j)]
        for job in jobs:
            if job_finished(job) == "Complete":
                done = (job.get("status") or {}).get("completionTime")
                if done and (status.get("lastSuccessfulTime") or "") < done:
                    status["lastSuccessfulTime"] = done
        wake: float | None = None
        try:
            schedule = cron.parse(str(spec.get("schedule") or ""))
        except cron.CronError:
            schedule = None  # validation keeps these out; nothing to schedule
        if schedule is not None:
            zone = _zone(cron_job)
            now = datetime.datetime.fromtimestamp(self._clock.time(), zone)
            since = parse_rfc3339(status.get("lastScheduleTime") or meta(cron_job).get("creationTimestamp"))
            earliest = datetime.datetime.fromtimestamp(since or self._clock.time(), zone)
            deadline = spec.get("startingDeadlineSeconds")
            if isinstance(deadline, int) and earliest < now - datetime.timedelta(seconds=deadline):
                earliest = now - datetime.timedelta(seconds=deadline)
            latest, upcoming = latest_activation(schedule, earliest, now)
            if latest is not None and not spec.get("suspend"):
                policy = spec.get("concurrencyPolicy", "Allow")
                if policy == "Forbid" and active:
                    pass  # skipped; lastScheduleTime stays, so it is retried until the Job ends
                else:
                    if policy == "Replace":
                        for job in active:
                            self._delete(job)
                        active = []
                    created = self._create_job(cron_job, latest)
                    if created is not None:
                        active.append(created)
                    status["lastScheduleTime"] = rfc3339(latest.timestamp())
            wake = max(0.0, upcoming.timestamp() - self._clock.time())
        if active:
            status["active"] = [self._reference(j) for j in active]
        else:
            status.pop("active", None)
        self._trim_history(spec, [j for j in jobs if job_finished(j)])
        if status != (cron_job.get("status") or {}):
            self._store.update(self._cron_jobs, ns, name, status_body(cron_job, status), subresource="status")
        return wake

    @staticmethod
    def _reference(job: Mapping[str, Any]) -> Obj:
        m = meta(job)
        return {
            "kind": "Job",
            "namespace": m["namespace"],
            "name": m["name"],
            "uid": m["uid"],
            "apiVersion": "batch/v1",
            "resourceVersion": m.get("resourceVersion", ""),
        }

    def _create_job(self, cron_job: Obj, when: datetime.datetime) -> Obj | None:
        m = meta(cron_job)
        template = (cron_job.get("spec") or {}).get("jobTemplate") or {}
        tmeta = template.get("metadata") or {}
        annotations = {**(tmeta.get("annotations") or {}), SCHEDULED_TIMESTAMP: when.isoformat()}
        job_meta: Obj = {
            "name": f"{m['name']}-{int(when.timestamp() // 60)}",
            "namespace": m["namespace"],
            "annotations": annotations,
            "ownerReferences": [new_controller_ref(cron_job)],
        }
        if tmeta.get("labels"):
            job_meta["labels"] = tmeta["labels"]
        body = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": job_meta,
            "spec": template.get("spec") or {},
        }
        try:
            created = self._store.create(self._jobs, m["namespace"], body)
        except ApiError as err:
            if err.code != 409:  # already created for this activation
                raise
            return None
        self.loop.record_event()  # SuccessfulCreate
        return created

    def _trim_history(self, spec: Mapping[str, Any], finished: list[Obj]) -> None:
        for kind, limit_key, default in (
            ("Complete", "successfulJobsHistoryLimit", 3),
            ("Failed", "failedJobsHistoryLimit", 1),
        ):
            limit = spec.get(limit_key, default)
            if not isinstance(limit, int):
                continue
            same = sorted(
                (j for j in finished if job_finished(j) == kind and not being_deleted(j)),
                key=lambda j: meta(j).get("creationTimestamp", ""),
            )
            for job in same[: max(0, len(same) - limit)]:
                self._delete(job)

    def _delete(self, job: Obj) -> None:
        m = meta(job)
        try:
            self._store.delete(self._jobs, m["namespace"], m["name"], propagation_policy="Background")
        except ApiError as err:
            if err.code != 404:
                raise
