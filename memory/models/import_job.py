"""Import jobs run in the background: the seeding page's uploads, and whole memories."""

from __future__ import annotations

from django.conf import settings
from django.db import models

# The formats of jobs that import a whole memory (memory.services.transfer.jobs)
# rather than seeding rows (csv, jsonl, or "" for sniffed).
MEMORY_IMPORT_FORMATS = ("memory", "mem0", "graphiti")


class ImportJobStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class ImportJob(models.Model):
    """One uploaded CSV/JSONL seeding file, imported by a task that reports its progress.

    The file's text stays on the row, so a failed or interrupted import loses nothing and
    the report can always be traced back to its input.
    """

    context = models.ForeignKey("memory.Context", on_delete=models.CASCADE, related_name="+")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    filename = models.CharField(max_length=255, blank=True)
    # csv | jsonl | "" (sniffed) for seeding; one of MEMORY_IMPORT_FORMATS for a memory
    format = models.CharField(max_length=10, blank=True)
    scope_default = models.CharField(max_length=300, blank=True)
    content = models.TextField()
    size_bytes = models.PositiveIntegerField(default=0)
    status = models.CharField(
        max_length=10, choices=ImportJobStatus.choices, default=ImportJobStatus.PENDING
    )
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    created_count = models.PositiveIntegerField(default=0)
    matched_count = models.PositiveIntegerField(default=0)
    failed_count = models.PositiveIntegerField(default=0)
    # {"format", "notes": [...], "rows": [{"row", "line", "status", "entity_id", "message"}]}
    report = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    task_id = models.CharField(max_length=64, blank=True)
    # host:pid of the process importing the file. Liveness is not judged from it: the
    # executor holds an advisory lock on the job (memory.infra.locks), which dies with it.
    worker = models.CharField(max_length=100, blank=True)
    # A retry is a new job with the same file; it points at the job it retries.
    retry_of = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        # The table kept its name when the model moved here from the dashboard app.
        db_table = "curation_importjob"
        indexes = [
            # Seeding page: a context's jobs, newest first.
            models.Index(fields=["context", "-created_at"], name="import_job_recent"),
            # Stale-job recovery: the few jobs that claim to be importing.
            models.Index(
                fields=["context"], condition=models.Q(status="running"), name="import_job_running"
            ),
        ]

    def __str__(self) -> str:
        return f"import {self.pk} ({self.status}, {self.done}/{self.total})"

    @property
    def finished(self) -> bool:
        return self.status in (ImportJobStatus.SUCCEEDED, ImportJobStatus.FAILED)

    @property
    def imports_a_memory(self) -> bool:
        return self.format in MEMORY_IMPORT_FORMATS

    @property
    def percent(self) -> int:
        if self.status == ImportJobStatus.SUCCEEDED:
            return 100
        return int(100 * self.done / self.total) if self.total else 0
