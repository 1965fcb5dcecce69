"""Seeding: one entity by form, or a file imported by a task with progress and a report."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from curation.models import ImportJob
from curation.services import import_job_execute
from memory.models import Context, Entity

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
    assert 'value="100"' in html and "2 created, 0 matched, 1 failed" in html
    assert "the row has no name" in html  # the per-row report


def test_job_status_partial_polls_until_done_then_answers_286(
    admin: Client, base: str, context: Context
) -> None:
    job = ImportJob.objects.create(context=context, content=CSV, total=3, done=1, status="running")
    url = f"{base}/entities/seed/jobs/{job.pk}/"

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

    html = page_of(admin.get(f"{base}/entities/seed/jobs/{job.pk}/"))

    assert '<noscript><meta http-equiv="refresh" content="2"></noscript>' in html
    assert "Waiting for a task worker" in html


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
