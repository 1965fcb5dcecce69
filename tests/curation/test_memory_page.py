"""The memory page: the export downloaded, an export imported into an empty context by a
job with progress, and what an admin is told when an import cannot go ahead."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from memory.domain.access import ContextAccess
from memory.models import Context, Entity, Fact, ImportJob, Role
from memory.services.transfer.export import memory_export_lines
from tests.api.test_memory_foreign_import import GRAPHITI, MEM0
from tests.curation.conftest import Memory, page

pytestmark = pytest.mark.django_db


@pytest.fixture
def immediate_tasks(settings: Any) -> None:
    """Run enqueued tasks at once, in the test's process."""
    settings.TASKS = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}


@pytest.fixture
def target(make_context: Callable[..., Context]) -> Context:
    return make_context("restored")


@pytest.fixture
def target_admin(make_user: Callable[..., Any], target: Context) -> Client:
    client = Client()
    client.force_login(make_user(context=target, role=Role.ADMIN))
    return client


def _export(access: ContextAccess) -> str:
    return "".join(memory_export_lines(access=access))


def _upload(text: str, name: str = "acme.memory.jsonl") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode(), content_type="application/x-ndjson")


@pytest.mark.parametrize("role", [Role.VIEWER, Role.CURATOR])
def test_only_admins_export_or_import(
    client_for: Callable[..., Client], base: str, memory: Memory, role: Role
) -> None:
    failed = ImportJob.objects.create(
        context=memory.alex.context, format="memory", content="{}", status="failed"
    )
    client = client_for(role)
    assert client.get(f"{base}/memory/").status_code == 403
    assert client.get(f"{base}/memory/export.jsonl").status_code == 403
    upload = client.post(f"{base}/memory/import", {"file": _upload("{}"), "format": "memory"})
    assert upload.status_code == 403
    assert client.get(f"{base}/memory/jobs/{failed.pk}/").status_code == 403
    assert client.post(f"{base}/memory/jobs/{failed.pk}/retry").status_code == 403
    assert "Export &amp; import" not in page(client.get(f"{base}/"))
    assert ImportJob.objects.get() == failed  # no job started, none retried


def test_the_download_is_the_memory_s_export(
    admin: Client, base: str, memory: Memory, access: ContextAccess
) -> None:
    overview = page(admin.get(f"{base}/memory/"))
    assert "Download the export" in overview and 'id="import-refused"' in overview
    assert "Export &amp; import" in page(admin.get(f"{base}/"))  # the navigation's link

    response = admin.get(f"{base}/memory/export.jsonl")

    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="acme-test.memory.jsonl"'
    body = b"".join(response.streaming_content).decode()  # type: ignore[attr-defined]
    assert body.splitlines()[1:] == _export(access).splitlines()[1:]  # the header is dated
    assert json.loads(body.splitlines()[0])["record"] == "header"
    assert json.loads(body.splitlines()[-1])["counts"]["fact"] == Fact.objects.count()


@pytest.mark.usefixtures("immediate_tasks")
def test_an_export_uploaded_into_an_empty_context_is_imported_with_progress(
    access: ContextAccess,
    memory: Memory,
    target: Context,
    target_admin: Client,
    django_capture_on_commit_callbacks: Any,
) -> None:
    target_base = f"/c/{target.slug}"
    empty = page(target_admin.get(f"{target_base}/memory/"))
    assert "Upload and import" in empty and "import-refused" not in empty

    with django_capture_on_commit_callbacks(execute=True):
        response = target_admin.post(
            f"{target_base}/memory/import", {"file": _upload(_export(access)), "format": "memory"}
        )

    job = ImportJob.objects.get(context=target)
    assert response.status_code == 302
    assert response["Location"] == f"{target_base}/memory/jobs/{job.pk}/"
    shown = page(target_admin.get(response["Location"]))
    assert "finished" in shown and 'id="job-counts"' in shown
    assert (
        Fact.objects.filter(context=target).count()
        == Fact.objects.filter(context=access.context).count()
    )
    assert Entity.objects.filter(context=target, name="Alex").exists()
    # An htmx poll of a finished job stops the polling.
    poll = target_admin.get(response["Location"], headers={"HX-Request": "true"})
    assert poll.status_code == 286
    # The memory's own page lists it; the seeding page's list does not.
    assert f"/memory/jobs/{job.pk}/" in page(target_admin.get(f"{target_base}/memory/"))
    assert f"/seed/jobs/{job.pk}/" not in page(target_admin.get(f"{target_base}/entities/seed/"))
    # Now the context holds a memory: no second import is offered.
    assert 'id="import-refused"' in page(target_admin.get(f"{target_base}/memory/"))


def test_a_context_that_holds_a_memory_refuses_an_upload_and_says_why(
    admin: Client, base: str, memory: Memory, access: ContextAccess
) -> None:
    response = admin.post(
        f"{base}/memory/import", {"file": _upload(_export(access)), "format": "memory"}
    )

    assert response.status_code == 409
    assert "already holds" in page(response)
    assert not ImportJob.objects.exists()


@pytest.mark.parametrize(
    ("content", "format", "message"),
    [
        (b'{"record": "entity", "id": 1}\n', "memory", "not the header of a memory export"),
        (b"\xff\xfe not text", "memory", "not UTF-8"),
        (b"   \n", "memory", "the file is empty"),
        (b'{"format": "memory-desk-export"}\n', "spaceship", "Select a valid choice"),
    ],
)
def test_a_file_that_cannot_be_imported_is_refused_with_its_reason(
    target: Context, target_admin: Client, content: bytes, format: str, message: str
) -> None:
    response = target_admin.post(
        f"/c/{target.slug}/memory/import",
        {"file": SimpleUploadedFile("x.jsonl", content), "format": format},
    )

    assert response.status_code == 400
    assert message in page(response)
    assert not ImportJob.objects.exists()
    assert not Entity.objects.filter(context=target).exists()


def test_an_upload_past_the_limit_is_refused(
    target: Context, target_admin: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("curation.forms.memory_transfer.MAX_MEMORY_IMPORT_BYTES", 100)
    response = target_admin.post(
        f"/c/{target.slug}/memory/import",
        {"file": _upload("x" * 101), "format": "memory"},
    )

    assert response.status_code == 400
    assert "at most 100" in page(response)


@pytest.mark.usefixtures("immediate_tasks")
def test_a_failed_import_says_why_and_is_retried_as_a_new_job(
    access: ContextAccess,
    memory: Memory,
    target: Context,
    target_admin: Client,
    django_capture_on_commit_callbacks: Any,
) -> None:
    cut_short = "\n".join(_export(access).splitlines()[:-1])  # no end line
    target_base = f"/c/{target.slug}"
    with django_capture_on_commit_callbacks(execute=True):
        response = target_admin.post(
            f"{target_base}/memory/import", {"file": _upload(cut_short), "format": "memory"}
        )
    failed = ImportJob.objects.get(context=target)
    shown = page(target_admin.get(response["Location"]))
    assert failed.status == "failed"
    assert "cut short" in shown and "Nothing was written" in shown

    with django_capture_on_commit_callbacks(execute=True):
        retried = target_admin.post(f"{target_base}/memory/jobs/{failed.pk}/retry")

    retry = ImportJob.objects.exclude(pk=failed.pk).get()
    assert retried["Location"] == f"{target_base}/memory/jobs/{retry.pk}/"
    assert retry.retry_of_id == failed.pk and retry.format == "memory"
    assert retry.status == "failed"  # the same file, read again: cut short again
    assert "Retry of" in page(target_admin.get(retried["Location"]))
    assert not Entity.objects.filter(context=target).exists()


def test_a_seeding_job_is_not_shown_as_a_memory_import(
    target: Context, target_admin: Client, make_user: Callable[..., Any]
) -> None:
    seeding = ImportJob.objects.create(
        context=target, created_by=make_user(), format="csv", content="name\nAcme\n"
    )
    response = target_admin.get(f"/c/{target.slug}/memory/jobs/{seeding.pk}/")
    assert response.status_code == 404


def test_the_api_refuses_an_upload_past_the_limit(
    target: Context, api_client_for: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("memory.services.transfer.jobs.MAX_MEMORY_IMPORT_BYTES", 50)
    api = api_client_for(target)
    header = json.dumps({"record": "header", "format": "memory-desk-export", "version": 1})

    response = api.post(
        f"/api/v1/contexts/{target.slug}/import",
        header + "\n" + " " * 60,
        content_type="application/x-ndjson",
    )

    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "file_too_large"
    assert not ImportJob.objects.exists()


def test_an_import_whose_worker_died_is_failed_with_nothing_written(
    target: Context, target_admin: Client, make_user: Callable[..., Any]
) -> None:
    # "running", but no worker holds the job's lock: the process importing it is gone.
    stale = ImportJob.objects.create(
        context=target,
        created_by=make_user(),
        format="memory",
        content="{}",
        status="running",
        done=400,
        total=1_000,
        worker="host:123",
    )

    shown = page(target_admin.get(f"/c/{target.slug}/memory/jobs/{stale.pk}/"))

    stale.refresh_from_db()
    assert stale.status == "failed"
    assert "stopped after reading 400 of 1,000 lines" in stale.error
    assert "nothing was written" in stale.error and "matched" not in stale.error
    assert "nothing was written" in shown


def test_the_seeding_job_address_of_a_memory_import_leads_to_its_page(
    target: Context, target_admin: Client, make_user: Callable[..., Any]
) -> None:
    job = ImportJob.objects.create(
        context=target, created_by=make_user(), format="mem0", content="{}", status="failed"
    )
    response = target_admin.get(f"/c/{target.slug}/entities/seed/jobs/{job.pk}/")
    assert response.status_code == 302
    assert response["Location"] == f"/c/{target.slug}/memory/jobs/{job.pk}/"


@pytest.mark.usefixtures("immediate_tasks")
@pytest.mark.parametrize(
    ("format", "data", "name"), [("mem0", MEM0, "dev"), ("graphiti", GRAPHITI, "Alice")]
)
def test_a_foreign_export_uploaded_on_the_page_is_read_into_the_memory(
    target: Context,
    target_admin: Client,
    django_capture_on_commit_callbacks: Any,
    format: str,
    data: dict[str, Any],
    name: str,
) -> None:
    upload = SimpleUploadedFile(f"{format}.json", json.dumps(data).encode())
    with django_capture_on_commit_callbacks(execute=True):
        response = target_admin.post(
            f"/c/{target.slug}/memory/import", {"file": upload, "format": format}
        )

    job = ImportJob.objects.get(context=target)
    assert response["Location"] == f"/c/{target.slug}/memory/jobs/{job.pk}/"
    assert job.status == "succeeded", job.error
    assert Entity.objects.filter(context=target, name=name).exists()
    assert Fact.objects.filter(context=target).exists()
    assert f"{format} · " in page(target_admin.get(response["Location"]))


def test_a_file_cut_short_is_not_offered_for_a_retry(
    client_for: Callable[..., Client], base: str, context: Context
) -> None:
    cut = ImportJob.objects.create(
        context=context,
        format="memory",
        content='{"record": "header"',
        status="failed",
        error="line 1 stops mid-record: the file looks cut short. Export the memory again",
    )
    other = ImportJob.objects.create(
        context=context, format="memory", content="{}", status="failed", error="a database error"
    )
    admin = client_for(Role.ADMIN)

    html = page(admin.get(f"{base}/memory/jobs/{cut.pk}/"))
    assert "the file looks cut short" in html and "Retry with the same file" not in html
    assert "The same file would fail again: import a complete one." in html
    assert "Retry with the same file" in page(admin.get(f"{base}/memory/jobs/{other.pk}/"))
