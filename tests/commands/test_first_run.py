"""From a fresh install to a second context with a curator login and an agent token,
with the commands the README's "First run" walks through."""

from __future__ import annotations

import io
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.test import APIClient

from memory.models import AuditEvent, Context, ContextMembership, Role

pytestmark = pytest.mark.django_db


def _run(*args: str, stdin: str | None = None, monkeypatch: Any = None) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_a_new_admin_sets_up_a_context_a_curator_and_an_agent(monkeypatch: Any) -> None:
    out, _ = _run("createcontext", "research", "--name", "Research")
    assert out.strip() == "created context research (Research)"
    context = Context.objects.get(slug="research")
    assert context.predicates.exists()  # the standard registry, as POST contexts makes

    password, err = _run(
        "adduser", "rosa", "--context", "research", "--role", "curator", "--generate-password"
    )
    password = password.strip()
    assert "added dashboard user rosa: curator in research" in err and len(password) >= 16
    browser = Client()
    assert browser.login(username="rosa", password=password)
    assert browser.get("/c/research/").status_code == 200

    _, err = _run("adduser", "ingest-bot", "--context", "research", "--agent")
    assert "agent (cannot log in)" in err
    assert not Client().login(username="ingest-bot", password="")
    raw = StringIO()
    call_command(
        "issue_token", "ingest-bot", "--context", "research", "--grant", "read,write:*",
        stdout=raw, stderr=StringIO(),
    )  # fmt: skip
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {raw.getvalue().strip()}")
    assert api.get("/api/v1/contexts/research/facts").status_code == 200
    written = api.post(
        "/api/v1/contexts/research/facts",
        {"subject": {"name": "Rosa", "type": "person"}, "predicate": "works_at",
         "object": {"name": "Acme", "type": "company"}, "scope": "team"},
        format="json",
    )  # fmt: skip
    assert written.status_code in (200, 201), written.content

    memberships = ContextMembership.objects.filter(context=context)
    assert {(m.user.username, m.role) for m in memberships} == {
        ("rosa", Role.CURATOR),
        ("ingest-bot", Role.VIEWER),
    }
    assert AuditEvent.objects.filter(context=context, action="membership_set").count() == 2


def test_a_password_from_standard_input_and_a_role_change(monkeypatch: Any) -> None:
    _run("createcontext", "ops")
    out, _ = _run(
        "adduser", "lee", "--context", "ops", "--role", "admin", "--staff", "--password-stdin",
        stdin="correct horse battery staple\n", monkeypatch=monkeypatch,
    )  # fmt: skip
    assert out == ""  # nothing generated, nothing printed
    assert Client().login(username="lee", password="correct horse battery staple")
    assert get_user_model().objects.get(username="lee").is_staff

    _run("createcontext", "second")
    _, err = _run("adduser", "lee", "--context", "second", "--role", "viewer")
    assert "updated dashboard user lee: viewer in second" in err
    _run("adduser", "lee", "--context", "second", "--role", "curator")
    assert ContextMembership.objects.get(user__username="lee", context__slug="second").role == (
        Role.CURATOR
    )

    _run("createcontext", "third", "--admin", "lee")
    with pytest.raises(CommandError, match="last admin"):
        _run("adduser", "lee", "--context", "third", "--role", "viewer")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["createcontext", "Bad Slug!"], "invalid"),
        (["createcontext", "x", "--admin", "nobody"], "no user 'nobody'"),
        (["adduser", "a", "--context", "missing"], "no context 'missing'"),
        (["adduser", "bad name", "--context", "taken", "--generate-password"], "username"),
        (["adduser", "bot", "--context", "taken", "--agent", "--staff"], "agent has no"),
    ],
)
def test_bad_input_is_refused_and_writes_nothing(args: list[str], message: str) -> None:
    _run("createcontext", "taken")
    users_before = get_user_model().objects.count()
    with pytest.raises(CommandError, match=message):
        _run(*args)
    assert get_user_model().objects.count() == users_before
    assert Context.objects.count() == 1


def test_a_weak_password_and_a_taken_slug_are_refused(monkeypatch: Any) -> None:
    _run("createcontext", "taken")
    with pytest.raises(CommandError, match="already exists"):
        _run("createcontext", "taken")
    with pytest.raises(CommandError, match="too weak"):
        _run(
            "adduser", "pat", "--context", "taken", "--password-stdin",
            stdin="123\n", monkeypatch=monkeypatch,
        )  # fmt: skip
    assert not get_user_model().objects.filter(username="pat").exists()
