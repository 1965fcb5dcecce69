"""Seeding: one entity by form, or a file imported by a task with progress and a report."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client
from django.utils import timezone
from django_tasks import TaskResultStatus
from django_tasks_db.models import DBTaskResult

from memory.infra.locks import IMPORT_JOB_LOCK
from memory.models import AuditEvent, Context, Entity, ImportJob, Role
from memory.services.transfer.jobs import import_job_execute, import_jobs_recover_stale
from memory.tasks import import_job_task

pytestmark = pytest.mark.django_db

CSV = (
    "name,type,scope,aliases,email\n"
    "Acme Corp,company,org/acme,ACME;Acme Inc,\n"
    "Dana Reyes,person,org/acme,,dana@acme.test\n"
    ",person,org/acme,,\n"
)


@pytest.fixture
def immediate_tasks(settings: Any) -> None:
    """Run enqueued tasks at once, in the test's process."""
    settings.TASKS = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}


@contextmanager
def worker_importing(job: ImportJob) -> Iterator[None]:
    """A live worker importing ``job``: another session holds the job's executor lock."""
    params = connection.get_connection_params()
    other = connection.get_new_connection(params)
    try:
        other.execute("SELECT pg_advisory_lock(%s, %s)", [IMPORT_JOB_LOCK, job.pk])
        yield
    finally:
        other.close()  # a closed session releases its locks, as a dying worker's does


def _csv(text: str = CSV, name: str = "people.csv") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode(), content_type="text/csv")


def test_admin_seeds_one_entity(admin: Client, base: str) -> None:
    response = admin.post(
        f"{base}/entities/seed/one",
        {
            "name": "Globex",
            "type": "organisation",
            "scope": "org/acme",
            "aliases": "Globex Corp",
            "identifiers": "domain:globex.test",
            "attributes": '{"hq": "Springfield"}',
        },
    )

    globex = Entity.objects.get(name="Globex")
    assert response["Location"] == f"{base}/entities/{globex.pk}/"
    assert globex.seeded and globex.aliases == ["Globex Corp"]
    assert globex.identifiers.get().value == "globex.test"
    assert "Seeded Globex" in page_of(admin.get(response["Location"]))


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"name": "X", "type": "person", "scope": "bad scope!"}, "invalid scope"),
        ({"name": "", "type": "person", "scope": "org/acme"}, "This field is required"),
        ({"name": "X", "type": "person", "scope": "org/acme", "attributes": "1"}, "JSON object"),
    ],
)
def test_bad_seed_input_shows_errors_and_writes_nothing(
    admin: Client, base: str, data: dict[str, str], error: str
) -> None:
    response = admin.post(f"{base}/entities/seed/one", data)

    assert response.status_code == 400
    assert error in page_of(response)
    assert not Entity.objects.exists()


def test_seeding_outside_the_write_grants_is_refused(
    client_for: Callable[..., Client], base: str
) -> None:
    from memory.models import Role

    limited = client_for(Role.ADMIN, grants=["read:*", "write:org/acme/*"])

    response = limited.post(
        f"{base}/entities/seed/one", {"name": "X", "type": "person", "scope": "org/globex"}
    )

    assert response.status_code == 403
    assert not Entity.objects.exists()


def test_upload_creates_a_job_that_imports_the_file(
    admin: Client, base: str, immediate_tasks: None, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = admin.post(
            f"{base}/entities/seed/upload", {"file": _csv(), "scope_default": "org/acme"}
        )

    job = ImportJob.objects.get()
    assert response["Location"] == f"{base}/entities/seed/jobs/{job.pk}/"
    assert (job.status, job.done, job.total) == ("succeeded", 3, 3)
    assert (job.created_count, job.matched_count, job.failed_count) == (2, 0, 1)
    assert job.content == CSV and job.filename == "people.csv" and job.task_id
    assert set(Entity.objects.values_list("name", "seeded")) == {
        ("Acme Corp", True),
        ("Dana Reyes", True),
    }
    html = page_of(admin.get(response["Location"]))
    assert 'value="100"' in html and "2 created, 0 matched, 1 row failed" in html
    assert "the row has no name" in html  # the per-row report
    assert (
        '<span class="badge status-succeeded warn" id="job-state">finished with 1 error</span>'
        in html
    )
    dana = Entity.objects.get(name="Dana Reyes")
    assert f'href="{base}/entities/{dana.pk}/">Dana Reyes</a>' in html  # names, not "#23"
    assert "Waiting for a task worker" not in html


def test_job_status_partial_polls_until_done_then_answers_286(
    admin: Client, base: str, context: Context
) -> None:
    job = ImportJob.objects.create(context=context, content=CSV, total=3, done=1, status="running")
    url = f"{base}/entities/seed/jobs/{job.pk}/"

    with worker_importing(job):
        running = admin.get(url, HTTP_HX_REQUEST="true")
    ImportJob.objects.filter(pk=job.pk).update(status="succeeded", done=3, report={"rows": []})
    done = admin.get(url, HTTP_HX_REQUEST="true")
    full = admin.get(url)

    assert running.status_code == 200
    assert 'hx-trigger="every 1s"' in page_of(running)
    assert page_of(running).lstrip().startswith('<section class="card job" id="job-status"')
    assert 'value="33"' in page_of(running)
    assert done.status_code == 286
    assert "every 1s" not in page_of(done) and 'value="100"' in page_of(done)
    assert full.status_code == 200 and "<html" in page_of(full)


def test_page_of_a_running_job_refreshes_itself_without_javascript(
    admin: Client, base: str, context: Context
) -> None:
    job = ImportJob.objects.create(context=context, content=CSV, status="pending")

    fresh = page_of(admin.get(f"{base}/entities/seed/jobs/{job.pk}/"))
    ImportJob.objects.filter(pk=job.pk).update(created_at=timezone.now() - timedelta(seconds=5))
    waiting = page_of(admin.get(f"{base}/entities/seed/jobs/{job.pk}/"))

    assert '<noscript><meta http-equiv="refresh" content="2"></noscript>' in fresh
    # A worker takes a job within a poll: "waiting" only once nobody has for a while.
    assert "Waiting for a task worker" not in fresh and ">waiting for a worker</span>" in fresh
    assert "Waiting for a task worker" in waiting


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"\xff\xfename\n", "not UTF-8"),
        (b"", "The submitted file is empty"),
        (b"name\x00\n", "NUL bytes"),
        (b"  \n", "the file is empty"),
    ],
)
def test_unreadable_uploads_are_refused_and_create_no_job(
    admin: Client, base: str, raw: bytes, error: str
) -> None:
    response = admin.post(
        f"{base}/entities/seed/upload", {"file": SimpleUploadedFile("x.csv", raw)}
    )

    assert response.status_code == 400
    assert error in page_of(response)
    assert not ImportJob.objects.exists()


def test_a_bad_default_scope_is_refused(admin: Client, base: str) -> None:
    response = admin.post(
        f"{base}/entities/seed/upload", {"file": _csv(), "scope_default": "no good!"}
    )

    assert response.status_code == 400 and "invalid scope" in page_of(response)
    assert not ImportJob.objects.exists()


def test_a_file_the_importer_cannot_read_fails_the_job_with_its_reason(
    admin: Client, base: str, immediate_tasks: None, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        admin.post(f"{base}/entities/seed/upload", {"file": _csv("title,kind\nx,y\n")})

    job = ImportJob.objects.get()
    assert job.status == "failed" and "needs a 'name' column" in job.error
    html = page_of(admin.get(f"{base}/entities/seed/jobs/{job.pk}/"))
    assert "needs a &#x27;name&#x27; column" in html


def test_a_job_runs_once(context: Context, make_user: Callable[..., Any]) -> None:
    from memory.models import Role

    job = ImportJob.objects.create(
        context=context,
        created_by=make_user(context=context, role=Role.ADMIN),
        content="name,scope\nSolo,org/acme\n",
    )

    assert import_job_execute(job_id=job.pk) == "succeeded"
    assert import_job_execute(job_id=job.pk) == "succeeded"
    assert Entity.objects.count() == 1


def test_the_uploader_losing_admin_fails_the_job(
    context: Context, make_user: Callable[..., Any]
) -> None:
    from memory.models import Role

    job = ImportJob.objects.create(
        context=context,
        created_by=make_user(context=context, role=Role.CURATOR),
        content="name,scope\nSolo,org/acme\n",
    )

    assert import_job_execute(job_id=job.pk) == "failed"
    assert "needs the admin role" in ImportJob.objects.get().error
    assert not Entity.objects.exists()


def test_report_download(admin: Client, base: str, context: Context) -> None:
    job = ImportJob.objects.create(
        context=context,
        content=CSV,
        status="succeeded",
        created_count=1,
        report={"format": "csv", "notes": [], "rows": [{"row": 1, "status": "created"}]},
    )

    data = json.loads(admin.get(f"{base}/entities/seed/jobs/{job.pk}/report.json").content)

    assert data["created"] == 1 and data["rows"] == [{"row": 1, "status": "created"}]


def test_jobs_are_for_admins_and_stay_in_their_context(
    curator: Client,
    admin: Client,
    base: str,
    make_context: Callable[..., Context],
) -> None:
    other = ImportJob.objects.create(context=make_context("other-ctx"), content=CSV)

    assert admin.get(f"{base}/entities/seed/jobs/{other.pk}/").status_code == 404
    assert curator.get(f"{base}/entities/seed/jobs/{other.pk}/").status_code == 403
    assert "needs the <strong>admin</strong> role" in page_of(curator.get(f"{base}/entities/seed/"))


def test_seed_page_lists_recent_jobs(admin: Client, base: str, context: Context) -> None:
    ImportJob.objects.create(context=context, content=CSV, filename="first.csv")

    html = page_of(admin.get(f"{base}/entities/seed/"))

    assert "Recent imports" in html and "first.csv" in html


def page_of(response: Any) -> str:
    return str(response.content.decode())


def test_job_pages_need_a_login_and_the_admin_role(
    client: Client, viewer: Client, base: str, context: Context
) -> None:
    job = ImportJob.objects.create(context=context, content=CSV)

    for url in (
        f"{base}/entities/seed/jobs/{job.pk}/",
        f"{base}/entities/seed/jobs/{job.pk}/report.json",
    ):
        assert client.get(url).status_code == 302
        assert viewer.get(url).status_code == 403


def _stuck_job(context: Context, user: Any) -> ImportJob:
    """A job a worker claimed, imported 2 of 3 rows of, and died on."""
    return ImportJob.objects.create(
        context=context,
        created_by=user,
        content=CSV,
        scope_default="org/acme",
        status="running",
        worker="host-a:4242",
        done=2,
        total=3,
    )


def _claimed_task(job: ImportJob) -> DBTaskResult:
    """The job's task result as a worker left it: claimed, ``RUNNING``."""
    result = DBTaskResult.objects.get(pk=import_job_task.enqueue(job.pk).id)
    result.claim("host-a-worker")
    return result


def test_a_job_left_running_by_a_dead_worker_is_failed_with_its_reason(
    context: Context, make_user: Callable[..., Any]
) -> None:
    job = _stuck_job(context, make_user(context=context, role=Role.ADMIN))
    alive = _stuck_job(context, job.created_by)
    job_task, alive_task = _claimed_task(job), _claimed_task(alive)

    with worker_importing(alive):
        assert import_jobs_recover_stale() == 1

    job.refresh_from_db()
    assert job.status == "failed" and job.finished_at is not None
    assert "(host-a:4242) stopped after 2 of 3 rows" in job.error
    assert "Retry" in job.error and job.content == CSV  # the file stays for a retry
    assert ImportJob.objects.get(pk=alive.pk).status == "running"  # its worker holds it
    # The dead worker's task result is failed with the job's reason; the live one runs on.
    lost = DBTaskResult.objects.get(pk=job_task.pk).task_result
    assert lost.status == TaskResultStatus.FAILED and lost.finished_at is not None
    [error] = lost.errors
    assert error.exception_class_path == "memory.infra.queueing.WorkerLost"
    assert "(host-a:4242) stopped after 2 of 3 rows" in error.traceback
    assert DBTaskResult.objects.get(pk=alive_task.pk).status == TaskResultStatus.RUNNING


def test_the_job_page_notices_a_dead_worker_and_retry_imports_the_same_file(
    admin: Client,
    base: str,
    context: Context,
    make_user: Callable[..., Any],
    immediate_tasks: None,
    django_capture_on_commit_callbacks: Any,
) -> None:
    job = _stuck_job(context, make_user(context=context, role=Role.ADMIN))
    url = f"{base}/entities/seed/jobs/{job.pk}/"

    polled = admin.get(url, HTTP_HX_REQUEST="true")
    with django_capture_on_commit_callbacks(execute=True):
        retried = admin.post(f"{url}retry")

    assert polled.status_code == 286  # finished (failed): the progress bar stops polling
    assert "stopped after 2 of 3 rows" in page_of(polled)
    assert f'action="{url}retry"' in page_of(polled)
    retry = ImportJob.objects.exclude(pk=job.pk).get()
    assert retried["Location"] == f"{base}/entities/seed/jobs/{retry.pk}/"
    assert (retry.retry_of_id, retry.content, retry.scope_default) == (job.pk, CSV, "org/acme")
    assert (retry.status, retry.created_count, retry.failed_count) == ("succeeded", 2, 1)
    assert f'Retry of <a href="{url}">import #{job.pk}</a>' in page_of(
        admin.get(retried["Location"])
    )


def test_only_failed_jobs_can_be_retried(admin: Client, base: str, context: Context) -> None:
    job = ImportJob.objects.create(context=context, content=CSV, status="succeeded")

    response = admin.post(f"{base}/entities/seed/jobs/{job.pk}/retry")

    assert response.status_code == 409
    assert "only failed imports can be retried" in page_of(response)
    assert ImportJob.objects.count() == 1


def test_seed_page_fails_stuck_jobs_in_its_list(
    admin: Client, base: str, context: Context, make_user: Callable[..., Any]
) -> None:
    job = _stuck_job(context, make_user(context=context, role=Role.ADMIN))

    html = page_of(admin.get(f"{base}/entities/seed/"))

    assert 'class="badge status-failed bad"' in html
    assert ImportJob.objects.get(pk=job.pk).status == "failed"


def test_viewer_and_curator_cannot_retry_an_import(
    viewer: Client, curator: Client, base: str, context: Context
) -> None:
    job = ImportJob.objects.create(context=context, content=CSV, status="failed")

    for member in (viewer, curator):
        response = member.post(f"{base}/entities/seed/jobs/{job.pk}/retry")
        assert response.status_code == 403
        assert "needs the admin role" in page_of(response)
    assert ImportJob.objects.count() == 1


def test_job_report_is_paged(admin: Client, base: str, context: Context) -> None:
    rows = [
        {"row": i, "line": i + 1, "status": "error" if i % 2 else "created", "entity_id": None,
         "message": f"problem {i}" if i % 2 else ""}
        for i in range(1, 251)
    ]  # fmt: skip
    job = ImportJob.objects.create(
        context=context, content=CSV, status="succeeded", report={"rows": rows}
    )
    url = f"{base}/entities/seed/jobs/{job.pk}/"

    first, last = page_of(admin.get(url)), page_of(admin.get(f"{url}?page=3"))

    assert "Every row (250)" in first and "Page 1 of 3" in first
    assert first.count('<span class="badge outcome-') == 100
    assert (
        last.count('<span class="badge outcome-') == 50 and '<details id="job-rows" open>' in last
    )
    assert "the first 100; 25 more in the download" in first and "problem 199" in first
    assert "problem 201" not in first


def test_import_job_batches_are_audited_with_their_rows(
    admin: Client, base: str, immediate_tasks: None, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        admin.post(f"{base}/entities/seed/upload", {"file": _csv(), "scope_default": "org/acme"})

    event = AuditEvent.objects.get(action="entities_seed")
    assert event.summary == "seeded 2 entities (rows 1–3): 2 created, 0 marked canonical"
    assert [row["row"] for row in event.after["rows"]] == [1, 2]
    assert not Entity.objects.filter(embedding__isnull=True).exists()  # embedded per batch
