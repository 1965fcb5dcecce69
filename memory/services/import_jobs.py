"""Dashboard writes that compose memory's services: the registry's JSON import, and entity
import jobs (a stored upload, run by a task that reports its progress)."""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import asdict, dataclass
from typing import Any, Literal

from django.db import transaction
from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from curation.models import ImportJob, ImportJobStatus
from curation.selectors import REGISTRY_FORMAT, REGISTRY_VERSION
from curation.tasks import import_job_task
from memory.access import ContextAccess, context_access_resolve
from memory.errors import Conflict, DomainError, ValidationFailed
from memory.locks import IMPORT_JOB_LOCK, executor_lock
from memory.models import Context, Predicate, PredicateStatus, Role
from memory.predicate_names import predicate_check_text, predicate_normalize
from memory.services.entity_import import ImportFormat, entities_import
from memory.services.predicates import (
    predicate_alias_add,
    predicate_register,
    predicate_update,
)
from memory.tasks import task_results_fail_lost

logger = logging.getLogger(__name__)

MAX_REGISTRY_PREDICATES = 2000
PROGRESS_INTERVAL_SECONDS = 0.25


# --- registry import ------------------------------------------------------------------


class PredicateEntry(BaseModel):
    """One predicate of a registry file: the name, any editable field, and aliases."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(min_length=1, max_length=100)
    description: str | None = None
    example: str | None = None
    category: str | None = None
    kind: str | None = None
    subject_types: list[str] | None = None
    object_types: list[str] | None = None
    inverse: str | None = None
    default_importance: float | None = None
    ranking_weight: float | None = None
    single_valued: bool | None = None
    is_aggregate: bool | None = None
    lifecycle: str | None = None
    default_validity_days: int | None = None
    exclude_from_prompt: bool | None = None
    aliases: list[str] = Field(default_factory=list, max_length=100)

    def fields(self) -> dict[str, Any]:
        """The editable fields the file sets (a null validity is a value; others are not)."""
        given = self.model_dump(exclude={"name", "aliases"}, exclude_unset=True)
        return {k: v for k, v in given.items() if v is not None or k == "default_validity_days"}


class RegistryFile(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    format: str = REGISTRY_FORMAT
    version: int = REGISTRY_VERSION
    predicates: list[PredicateEntry] = Field(max_length=MAX_REGISTRY_PREDICATES)

    @field_validator("format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        if value != REGISTRY_FORMAT:
            raise ValueError(f"expected {REGISTRY_FORMAT!r}")
        return value

    @field_validator("version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value != REGISTRY_VERSION:
            raise ValueError(f"this desk reads version {REGISTRY_VERSION}")
        return value


def registry_file_parse(data: Any) -> list[PredicateEntry]:
    """Check a decoded registry file's shape (an export, or a bare list of predicates);
    ValidationFailed lists every problem found, naming where it is."""
    if isinstance(data, list):
        data = {"predicates": data}
    if not isinstance(data, dict):
        raise ValidationFailed('expected a JSON object with a "predicates" list')
    try:
        parsed = RegistryFile.model_validate(data)
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in error['loc']) or 'file'}: {error['msg']}"
            for error in exc.errors()[:10]
        ]
        raise ValidationFailed(
            "the file is not a registry export: " + "; ".join(problems),
            code="invalid_registry_file",
            details=problems,
        ) from None
    seen: dict[str, str] = {}
    for entry in parsed.predicates:
        try:
            predicate_check_text(entry.name)
        except ValidationFailed as exc:
            raise ValidationFailed(f"predicate {entry.name[:60]!r}: {exc.message}") from None
        form = predicate_normalize(entry.name)
        if form in seen:
            raise ValidationFailed(
                f"{entry.name!r} and {seen[form]!r} are the same predicate ({form}); "
                "list each predicate once",
                code="invalid_registry_file",
            )
        seen[form] = entry.name
    return parsed.predicates


ImportOutcomeKind = Literal["created", "promoted", "updated", "unchanged", "error"]


@dataclass(frozen=True)
class RegistryImportOutcome:
    name: str
    outcome: ImportOutcomeKind
    detail: str = ""


@dataclass(frozen=True)
class RegistryImportResult:
    outcomes: list[RegistryImportOutcome]

    @property
    def applied(self) -> bool:
        return not any(o.outcome == "error" for o in self.outcomes)


@transaction.atomic
def registry_import(
    *, access: ContextAccess, entries: list[PredicateEntry]
) -> RegistryImportResult:
    """Register new predicates and update existing ones through the registry services, all
    or nothing: every entry is tried (each in a savepoint, so all errors are reported at
    once) and any error rolls the whole import back. Aliases are added, never removed."""
    access.require_role(Role.ADMIN)
    outcomes: list[RegistryImportOutcome] = []
    for entry in entries:
        try:
            with transaction.atomic():
                outcomes.append(_import_predicate(access, entry))
        except DomainError as exc:
            outcomes.append(RegistryImportOutcome(entry.name, "error", exc.message))
    result = RegistryImportResult(outcomes)
    if not result.applied:
        transaction.set_rollback(True)
    return result


def _import_predicate(access: ContextAccess, entry: PredicateEntry) -> RegistryImportOutcome:
    form = predicate_normalize(entry.name)
    existing = Predicate.objects.filter(context=access.context, name=form).first()
    fields = entry.fields()
    if existing is None or existing.status != PredicateStatus.REGISTERED:
        predicate_register(access=access, name=form, aliases=entry.aliases, **fields)
        outcome: ImportOutcomeKind = "created" if existing is None else "promoted"
        return RegistryImportOutcome(form, outcome)
    changed = {f: v for f, v in fields.items() if getattr(existing, f) != v}
    if changed:
        predicate_update(access=access, predicate=existing, **changed)
    present = set(existing.alias_set.values_list("alias", flat=True))
    added = []
    for alias in entry.aliases:
        if predicate_normalize(alias) not in present | {form}:
            added.append(predicate_alias_add(access=access, predicate=existing, alias=alias).alias)
    if not changed and not added:
        return RegistryImportOutcome(form, "unchanged")
    detail = ", ".join([*sorted(changed), *(f"alias {a}" for a in added)])
    return RegistryImportOutcome(form, "updated", detail)


# --- entity import jobs ---------------------------------------------------------------


@transaction.atomic
def import_job_create(
    *,
    access: ContextAccess,
    content: str,
    filename: str = "",
    format: ImportFormat | None = None,
    scope_default: str = "",
) -> ImportJob:
    """Keep an uploaded seeding file and queue its import (admin). The task starts once
    this transaction commits."""
    access.require_role(Role.ADMIN)
    job = ImportJob.objects.create(
        context=access.context,
        created_by=access.user if getattr(access.user, "is_authenticated", False) else None,
        filename=filename[:255],
        format=format or "",
        scope_default=scope_default,
        content=content,
        size_bytes=len(content.encode()),
    )
    transaction.on_commit(lambda: _enqueue(job.pk))
    return job


def _enqueue(job_id: int) -> None:
    result = import_job_task.enqueue(job_id)
    ImportJob.objects.filter(pk=job_id).update(task_id=str(result.id)[:64])


class _ProgressWriter:
    """``on_progress`` for entities_import: writes done/total to the job row at most a few
    times a second (and always for the first and last row), each write its own commit."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        self.written_at: float | None = None

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        due = self.written_at is None or now - self.written_at >= PROGRESS_INTERVAL_SECONDS
        if due or done == total:
            ImportJob.objects.filter(pk=self.job_id).update(done=done, total=total)
            self.written_at = now


def import_job_execute(*, job_id: int) -> str:
    """Run a pending job once (a second delivery of the task finds it claimed); returns
    the job's final status. The uploader's access is checked again now, not at upload.

    The executor holds the job's advisory lock throughout, so a job left ``running`` by a
    worker that died can be told from one still importing (``import_jobs_recover_stale``).
    """
    with executor_lock(IMPORT_JOB_LOCK, job_id) as held:
        if not held:  # another worker is importing it
            return str(ImportJob.objects.get(pk=job_id).status)
        claimed = ImportJob.objects.filter(pk=job_id, status=ImportJobStatus.PENDING).update(
            status=ImportJobStatus.RUNNING,
            started_at=timezone.now(),
            worker=f"{socket.gethostname()[:80]}:{os.getpid()}",
        )
        job = ImportJob.objects.select_related("context", "created_by").get(pk=job_id)
        if not claimed:
            return str(job.status)
        return _import(job)


def _import(job: ImportJob) -> str:
    if job.created_by is None:
        return _fail(job, "the user who uploaded this file no longer exists")
    try:
        access = context_access_resolve(user=job.created_by, slug=job.context.slug)
        report = entities_import(
            access=access,
            content=job.content,
            format=job.format or None,  # type: ignore[arg-type]
            scope_default=job.scope_default or None,
            seeded=True,
            on_progress=_ProgressWriter(job.pk),
            embed_now=True,  # this is the worker: embed each batch rather than queue it
        )
    except DomainError as exc:
        return _fail(job, exc.message)
    except Exception:
        logger.exception("import job %s stopped", job.pk)
        _fail(job, "the import stopped on an internal error; the file is kept on this job")
        raise
    ImportJob.objects.filter(pk=job.pk).update(
        status=ImportJobStatus.SUCCEEDED,
        done=report.total,
        total=report.total,
        created_count=report.created,
        matched_count=report.matched,
        failed_count=report.failed,
        report={
            "format": report.format,
            "notes": report.notes,
            "rows": [asdict(row) for row in report.rows],
        },
        finished_at=timezone.now(),
    )
    return ImportJobStatus.SUCCEEDED


def import_jobs_recover_stale(
    *, context: Context | None = None, job_ids: list[int] | None = None
) -> int:
    """Fail the jobs left ``running`` by a worker that died; return how many.

    A running job whose advisory lock we can take has no executor. Its file stays on the
    job for a retry; the batches it committed stay too (retrying matches those rows
    instead of duplicating them). The dead worker's task result is failed too. Called
    when a worker picks up an import task, when a job or the seeding page is looked at,
    and before a retry.
    """
    running = ImportJob.objects.filter(status=ImportJobStatus.RUNNING)
    if context is not None:
        running = running.filter(context=context)
    if job_ids is not None:
        running = running.filter(pk__in=job_ids)
    recovered = 0
    for job_id, worker, done, total in running.values_list("pk", "worker", "done", "total"):
        with executor_lock(IMPORT_JOB_LOCK, job_id) as held:
            if not held:
                continue  # alive: its executor holds the lock
            error = (
                f"the worker importing this file ({worker or 'unknown'}) stopped after "
                f"{done:,} of {total:,} rows; those rows are stored, the rest are not. "
                "Retry to import the file again: rows already stored are matched, not "
                "duplicated."
            )
            failed = ImportJob.objects.filter(pk=job_id, status=ImportJobStatus.RUNNING).update(
                status=ImportJobStatus.FAILED, finished_at=timezone.now(), error=error
            )
            if failed:  # and its task result, instead of "running" for ever
                task_results_fail_lost(task=import_job_task, args=[job_id], reason=error)
            recovered += failed
    return recovered


@transaction.atomic
def import_job_retry(*, access: ContextAccess, job: ImportJob) -> ImportJob:
    """A new pending job with a failed job's file (``retry_of`` links them), queued."""
    access.require_role(Role.ADMIN)
    import_jobs_recover_stale(job_ids=[job.pk])
    job.refresh_from_db()
    if job.status != ImportJobStatus.FAILED:
        raise Conflict(
            f"import {job.pk} is {job.status}; only failed imports can be retried",
            code="import_not_failed",
        )
    retry = import_job_create(
        access=access,
        content=job.content,
        filename=job.filename,
        format=job.format or None,  # type: ignore[arg-type]
        scope_default=job.scope_default,
    )
    ImportJob.objects.filter(pk=retry.pk).update(retry_of=job)
    retry.retry_of = job
    return retry


def _fail(job: ImportJob, message: str) -> str:
    ImportJob.objects.filter(pk=job.pk).update(
        status=ImportJobStatus.FAILED, error=message, finished_at=timezone.now()
    )
    return ImportJobStatus.FAILED
