"""Browser tests: Chromium (the machine's, else Debian's fetched once into var/chromium/;
tests/browser/chromium.py) driven by Playwright against pytest-django's live server (a real
HTTP server on a transactional test database)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from playwright.sync_api import Browser, Page, sync_playwright

from memory.models import Context, ContextMembership, Role
from tests.browser.chromium import ChromiumNotFound, chromium_for_tests

# Playwright's sync API runs an event loop in this thread; Django's ORM calls made here
# (fixtures creating data) are still plain synchronous calls.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PASSWORD = "pw-for-browser-tests"
SCREENSHOTS = Path(settings.BASE_DIR) / "var" / "screenshots"


@pytest.fixture(scope="session")
def browser(request: pytest.FixtureRequest) -> Iterator[Browser]:
    capture = request.config.pluginmanager.getplugin("capturemanager")

    def say(line: str) -> None:
        # Shown as it happens, not kept for a failure report: a first fetch takes a while.
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            print(f"\n{line}", flush=True)

    with sync_playwright() as playwright:
        try:
            executable = chromium_for_tests(
                playwright.chromium.executable_path, Path(settings.VAR_DIR) / "chromium", say
            )
        except ChromiumNotFound as missing:
            # One plain message (repeated per test by pytest), not a launch traceback.
            pytest.fail(str(missing), pytrace=False)
        browser = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser, live_server: Any, transactional_db: None) -> Iterator[Page]:
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(20_000)
    # The first page that ranks drift suggestions loads the embedding model in the server.
    tab.set_default_navigation_timeout(90_000)
    yield tab
    context.close()


@pytest.fixture
def member(transactional_db: None) -> Callable[..., Any]:
    """A user with a password (to log in through the form) and a role in a context."""

    def make(username: str, context: Context, role: Role) -> Any:
        user = get_user_model().objects.create_user(username=username, password=PASSWORD)
        ContextMembership.objects.create(
            user=user, context=context, role=role, grants=["read,write:*"]
        )
        return user

    return make


def log_in(page: Page, username: str) -> None:
    page.goto("/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button:has-text('Log in')")
    page.wait_for_url("**/")


def screenshot(page: Page, name: str, *, full_page: bool = True) -> Path:
    """Keep a picture of the page under var/screenshots/ (git-ignored) for a person to
    look at; nothing compares them."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


def _database_url() -> str:
    """The live server's test database, for a worker in another process."""
    db = connection.settings_dict
    user = quote(db["USER"] or "", safe="")
    password = f":{quote(db['PASSWORD'], safe='')}" if db.get("PASSWORD") else ""
    host, port = db.get("HOST") or "", db.get("PORT") or ""
    if host.startswith("/"):  # a Unix socket folder (the embedded server)
        return f"postgresql://{user}{password}@/{db['NAME']}?host={quote(host, safe='')}"
    return f"postgresql://{user}{password}@{host}{f':{port}' if port else ''}/{db['NAME']}"


@pytest.fixture
def task_worker(transactional_db: None) -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    """Start ``manage.py db_worker`` against the test database. It runs one task, the
    highest priority one (an import outranks the embedding tasks that writes queue), and
    exits: the embeddings are not these tests' business."""
    started: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "DATABASE_URL": _database_url(),
            "DJANGO_SETTINGS_MODULE": "memory.settings",
        }
        env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        worker = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "db_worker",
                "--interval",
                "0.2",
                "--no-startup-delay",
                "--no-reload",
                "--max-tasks",
                "1",
            ],
            cwd=settings.BASE_DIR,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        started.append(worker)
        return worker

    yield start
    for worker in started:
        if worker.poll() is None:
            worker.terminate()
            try:
                worker.wait(timeout=10)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
