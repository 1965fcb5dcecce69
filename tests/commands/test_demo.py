from __future__ import annotations

import re
from io import StringIO

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command

from memory.access import system_access
from memory.entity_names import entity_normalize_key
from memory.models import (
    ApiToken,
    Conflict,
    Context,
    ContextMembership,
    Entity,
    Fact,
    FactStatus,
    PredicateStatus,
    Role,
)
from memory.selectors.duplicates import duplicate_cluster_page

# migrate runs inside the command; a transactional test keeps it away from the test's
# own transaction.
pytestmark = pytest.mark.django_db(transaction=True)


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


def test_demo_twice_does_not_duplicate_and_resets_the_login() -> None:
    first = _demo()
    context = Context.objects.get(slug="demo")
    before = _counts(context)

    second = _demo()

    assert _counts(context) == before
    assert Context.objects.filter(slug="demo").count() == 1
    old_password, new_password = _password(first), _password(second)
    assert old_password != new_password
    assert authenticate(username="curator", password=old_password) is None
    curator = authenticate(username="curator", password=new_password)
    assert curator is not None and not curator.is_superuser
    membership = ContextMembership.objects.get(user=curator, context=context)
    assert membership.role == Role.CURATOR  # the curator login is a curator, not an admin
    admin_password = re.search(r"^Admin +admin / (\S+)", second, re.MULTILINE)[1]  # type: ignore[index]
    admin = authenticate(username="admin", password=admin_password)
    assert ContextMembership.objects.get(user=admin, context=context).role == Role.ADMIN
    token = ApiToken.objects.get(digest=ApiToken.digest_of(_token(second)))
    assert (token.user, token.context, token.grants) == (curator, context, ["read:*", "write:*"])


def test_demo_reset_reloads_from_scratch() -> None:
    _demo()
    context = Context.objects.get(slug="demo")
    before = _counts(context)

    _demo("--reset")

    reloaded = Context.objects.get(slug="demo")
    assert reloaded.pk != context.pk
    assert _counts(reloaded) == before
