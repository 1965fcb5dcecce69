from __future__ import annotations

from django.conf import settings
from django.db import models


class RunOutcome(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    # Finished, but some items were refused or changed on the way (``Run.summary``'s
    # ``warnings`` and ``unresolved`` say how many): see docs/decisions/0044.
    SUCCEEDED_WITH_WARNINGS = "succeeded_with_warnings"
    FAILED = "failed"


# The outcomes of a run that finished writing (its writes committed).
FINISHED_WRITING = (RunOutcome.SUCCEEDED, RunOutcome.SUCCEEDED_WITH_WARNINGS)


class Run(models.Model):
    """One ingest of a turn. The input is kept whatever happens, so a failed run can retry."""

    context = models.ForeignKey("memory.Context", on_delete=models.CASCADE, related_name="runs")
    scope = models.CharField(max_length=300)
    mode = models.CharField(max_length=10)
    input_text = models.TextField(blank=True)
    input_payload = models.JSONField(default=dict, blank=True)
    source = models.CharField(max_length=300, blank=True)
    prompt = models.TextField(blank=True)
    raw_output = models.TextField(blank=True)
    parsed_output = models.JSONField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    outcome = models.CharField(
        max_length=30, choices=RunOutcome.choices, default=RunOutcome.PENDING
    )
    error = models.TextField(blank=True)
    timings = models.JSONField(default=dict, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    attempts = models.PositiveIntegerField(default=0)
    retry_of = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # host:pid of the process executing the run. Liveness is not judged from it: the
    # executor holds a PostgreSQL advisory lock on the run, which dies with its session.
    worker = models.CharField(max_length=100, blank=True)
    # Counts of the result (entities created, facts written...) for run lists.
    summary = models.JSONField(default=dict, blank=True)
    # Set while the run's writes are retracted (services/ingest/retract.py); cleared by the
    # retraction's undo.
    retracted_at = models.DateTimeField(null=True, blank=True)
    retracted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        indexes = [
            # Runs page: a context's runs newest first, optionally by outcome.
            models.Index(fields=["context", "-created_at"], name="run_recent"),
            models.Index(fields=["context", "outcome"], name="run_outcome"),
            # Stale-run recovery: the few runs that claim to be executing.
            models.Index(
                fields=["started_at"],
                condition=models.Q(outcome="running"),
                name="run_running",
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.mode}, {self.outcome})"
