from __future__ import annotations

import re
import socket
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import CommandError, call_command
from django.utils import timezone

from memory.domain.access import system_access
from memory.domain.entity_names import entity_normalize_key
from memory.models import (
    ApiToken,
    Conflict,
    Context,
    ContextMembership,
    Document,
    Entity,
    Fact,
    FactStatus,
    PredicateStatus,
    Role,
    Run,
    RunOutcome,
    Turn,
)
from memory.selectors.duplicates import duplicate_cluster_page
from memory.selectors.search import search

# migrate runs inside the command; a transactional test keeps it away from the test's
# own transaction.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _credentials_in_tmp(settings: Any, tmp_path: Path) -> None:
    """The demo keeps its logins under MEMORY_VAR_DIR: not the developer's own var/."""
    settings.VAR_DIR = tmp_path


def _demo(*args: str) -> str:
    out = StringIO()
    call_command("demo", "--no-serve", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def _password(out: str) -> str:
    return re.search(r"^Login +curator / (\S+)", out, re.MULTILINE)[1]  # type: ignore[index]


def _token(out: str) -> str:
    return re.search(r"^API token +(\S+)", out, re.MULTILINE)[1]  # type: ignore[index]


def _counts(context: Context) -> tuple[int, int]:
    return Entity.objects.filter(context=context).count(), Fact.objects.filter(
        context=context
    ).count()


def test_demo_loads_drift_duplicates_history_and_a_conflict() -> None:
    out = _demo()

    context = Context.objects.get(slug="demo")
    entities, facts = _counts(context)
    assert 18 <= entities <= 25 and facts > 25
    observed = set(
        context.predicates.filter(status=PredicateStatus.OBSERVED).values_list("name", flat=True)
    )
    assert {"works_for", "joined", "collaborates_with"} <= observed
    # Near-duplicates: the same key in different scopes, and a one-letter spelling variant.
    keys = {(e.scope, e.normalized_key) for e in Entity.objects.filter(context=context)}
    assert {("org/acme", "acme"), ("org/globex", "acme")} <= keys
    assert {("org/acme", "globex"), ("org/globex", "globex")} <= keys
    assert {("org/acme", "jon smith"), ("org/acme", "john smith")} <= keys
    assert entity_normalize_key("ACME Inc.") == "acme"
    # Found as the demo was loaded, without a scan: Jon / John Smith, Priya Patel / Patil.
    clusters, _ = duplicate_cluster_page(access=system_access(context))
    names = [{m.name for m in c.members} for c in clusters]
    assert {"Jon Smith", "John Smith"} in names and {"Priya Patel", "Priya Patil"} in names
    assert all(pair.explain for c in clusters for pair in c.pairs)
    superseded = Fact.objects.filter(
        context=context, predicate__name="current_title", status=FactStatus.SUPERSEDED
    )
    assert superseded.count() == 3
    assert Conflict.objects.filter(context=context).count() == 1
    assert "http://127.0.0.1:8000/api/docs/" in out


def _admin_password(out: str) -> str:
    return re.search(r"^Admin +admin / (\S+)", out, re.MULTILINE)[1]  # type: ignore[index]


def _live_demo_tokens(context: Context) -> list[ApiToken]:
    return list(ApiToken.objects.filter(context=context, name="demo", revoked_at__isnull=True))


def test_demo_restarted_twice_keeps_its_logins_and_one_token() -> None:
    first = _demo()
    context = Context.objects.get(slug="demo")
    before = _counts(context)

    second = _demo()
    third = _demo()

    assert _counts(context) == before
    assert Context.objects.filter(slug="demo").count() == 1
    assert _password(first) == _password(second) == _password(third)
    assert _admin_password(first) == _admin_password(third)
    assert _token(first) == _token(second) == _token(third)
    curator = authenticate(username="curator", password=_password(third))
    assert curator is not None and not curator.is_superuser
    membership = ContextMembership.objects.get(user=curator, context=context)
    assert membership.role == Role.CURATOR  # the curator login is a curator, not an admin
    admin = authenticate(username="admin", password=_admin_password(third))
    assert ContextMembership.objects.get(user=admin, context=context).role == Role.ADMIN
    [token] = _live_demo_tokens(context)  # one token, not one per start
    assert token.digest == ApiToken.digest_of(_token(third))
    assert (token.user, token.context, token.grants) == (curator, context, ["read:*", "write:*"])
    assert "stay the same across restarts" in third


def test_the_credentials_are_kept_for_the_owner_only(settings: Any) -> None:
    _demo()
    path = Path(settings.VAR_DIR) / "demo-credentials.json"
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_password_changed_since_is_kept_and_a_revoked_token_replaced() -> None:
    first = _demo()
    context = Context.objects.get(slug="demo")
    curator = get_user_model().objects.get(username="curator")
    curator.set_password("chosen-by-the-curator")
    curator.save()
    ApiToken.objects.filter(context=context).update(revoked_at=timezone.now())

    second = _demo()

    assert "curator / (changed since: kept; --reset sets a new one)" in second
    assert authenticate(username="curator", password="chosen-by-the-curator") is not None
    assert _admin_password(second) == _admin_password(first)
    assert _token(second) != _token(first)
    [token] = _live_demo_tokens(context)
    assert token.digest == ApiToken.digest_of(_token(second))


def test_demo_reset_issues_new_logins_and_revokes_nothing_it_keeps() -> None:
    first = _demo()

    second = _demo("--reset")

    assert _password(second) != _password(first)
    assert authenticate(username="curator", password=_password(first)) is None
    assert authenticate(username="curator", password=_password(second)) is not None
    context = Context.objects.get(slug="demo")
    [token] = _live_demo_tokens(context)
    assert token.digest == ApiToken.digest_of(_token(second))


def test_demo_ships_runs_turns_and_documents() -> None:
    _demo()
    context = Context.objects.get(slug="demo")
    runs = Run.objects.filter(context=context)
    assert runs.count() == 3
    assert set(runs.values_list("outcome", flat=True)) == {RunOutcome.SUCCEEDED}
    turns = Turn.objects.filter(context=context).order_by("said_at")
    assert [t.speaker for t in turns] == ["Alex Rivera", "Maria Chen"]
    assert {t.thread for t in turns} == {"phoenix-standup"}
    said = Fact.objects.filter(context=context, turn=turns[0])
    assert sorted(said.values_list("predicate__name", flat=True)) == ["milestone", "works_on"]
    assert Fact.objects.filter(context=context, predicate__name="leads").count() == 1
    titles = set(Document.objects.filter(context=context).values_list("title", flat=True))
    assert "Project Phoenix kickoff notes" in titles and len(titles) == 3
    found = search(access=system_access(context), query="Phoenix migration plan", mode="bm25", k=5)
    assert found.results, "a first search finds the demo's documents"


def test_demo_reset_reloads_from_scratch() -> None:
    _demo()
    context = Context.objects.get(slug="demo")
    before = _counts(context)

    _demo("--reset")

    reloaded = Context.objects.get(slug="demo")
    assert reloaded.pk != context.pk
    assert _counts(reloaded) == before


def _children() -> set[int]:
    found: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        found.update(int(pid) for pid in (task / "children").read_text().split())
    return found


def test_a_second_demo_on_a_busy_port_says_so_and_starts_nothing() -> None:
    with socket.socket() as first:  # the demo already running
        first.bind(("127.0.0.1", 0))
        first.listen()
        addrport = f"127.0.0.1:{first.getsockname()[1]}"
        before = _children()
        with pytest.raises(CommandError, match="already in use: is a demo already running"):
            call_command("demo", "--addrport", addrport, stdout=StringIO(), stderr=StringIO())
        assert _children() == before  # no task worker left behind
    assert not Context.objects.filter(slug="demo").exists()  # refused before any work
