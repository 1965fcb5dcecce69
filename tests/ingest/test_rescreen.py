"""``manage.py rescreen``: stored turns and chunks screened again with the current rules;
secrets the older rules let through leave the text, the postings and the vector."""

from __future__ import annotations

import io

from django.core.management import call_command
from rest_framework.test import APIClient

from memory.domain.access import ContextAccess
from memory.models import Chunk, Turn
from memory.services.ingest.documents import document_create

SECRET = "Tr0ub4dor&3"


def test_rescreen_redacts_what_older_rules_kept(
    api: APIClient, base: str, access: ContextAccess
) -> None:
    body = {"text": "VPN at 9.", "scope": "org/acme", "infer": "none", "wait": True}
    assert api.post(f"{base}/memories", body, format="json").status_code == 200
    turn = Turn.objects.get()
    # As an older screening stored it: the secret in clear.
    Turn.objects.filter(pk=turn.pk).update(text=f"Login for the VPN: user dana, password {SECRET}")
    document_create(access=access, scope="org/acme", title="Runbook", text="Deploy notes.")
    Chunk.objects.update(text="Deploy key sk-live-4fJ9kQ2mZ8xR7vB1nT6yH3wL0pC5dE8gA2sK9uV4xy")

    dry = io.StringIO()
    call_command("rescreen", "--dry-run", stdout=dry)
    assert "would redact 2 secret(s): 1 turn(s)" in dry.getvalue()
    assert SECRET in Turn.objects.get().text

    out = io.StringIO()
    call_command("rescreen", stdout=out)
    assert "redacted 2 secret(s): 1 turn(s)" in out.getvalue()
    turn = Turn.objects.get()
    assert SECRET not in turn.text and turn.flags and turn.embedding is None
    assert "4fJ9kQ2" not in Chunk.objects.get().text
    found = api.post(
        f"{base}/search", {"query": SECRET, "target": "turns", "mode": "bm25"}, format="json"
    ).json()
    assert SECRET not in str(found)
    again = io.StringIO()
    call_command("rescreen", stdout=again)
    assert "redacted 0 secret(s)" in again.getvalue()
