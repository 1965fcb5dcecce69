"""Who may open which page and send which action, for every dashboard URL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from memory.models import AuditEvent, Context, Fact, Predicate, Role
from tests.curation.conftest import Memory, page

pytestmark = pytest.mark.django_db

# Every screen, as a path under /c/<ctx>/ (ids filled in from the ``memory`` fixture).
PAGES = [
    "",
    "drift/",
    "duplicates/",
    "conflicts/",
    "registry/",
    "registry/works_at/",
    "entities/",
    "entities/{alex}/",
    "entities/seed/",
    "documents/",
    "search/",
    "runs/",
    "runs/{run}/",
    "audit/",
    "facts/",
    "facts/{fact}/",
    "conversations/",
    "review/",
    "constraints/",
    "items/",
]
ADMIN_PAGES = ["registry/export.json", "tokens/", "memory/", "memory/export.jsonl"]

# Every action: (path, form data, the role it needs).
ACTIONS: list[tuple[str, dict[str, Any], Role]] = [
    ("drift/works_for/resolve", {"action": "reject"}, Role.CURATOR),
    ("drift/works_for/promote", {"category": "work", "kind": "relation"}, Role.CURATOR),
    ("drift/bulk", {"action": "reject", "names": ["works_for"]}, Role.CURATOR),
    ("conflicts/{conflict}/resolve", {"action": "keep_new"}, Role.CURATOR),
    ("duplicates/preview", {"ids": ["1", "2"], "survivor": "1"}, Role.CURATOR),
    ("duplicates/merge", {"ids": ["1", "2"], "survivor": "1"}, Role.CURATOR),
    ("duplicates/dismiss", {"ids": ["1", "2"]}, Role.CURATOR),
    ("duplicates/scan", {}, Role.CURATOR),
    ("merges/999999/undo", {}, Role.CURATOR),
    ("runs/{run}/retry", {}, Role.CURATOR),
    ("runs/{run}/retract", {"preview": "1"}, Role.CURATOR),
    ("registry/works_at/aliases", {"alias": "employed_at"}, Role.CURATOR),
    ("registry/works_at/aliases/remove", {"alias": "employed_by"}, Role.CURATOR),
    ("audit/{event}/undo", {}, Role.CURATOR),
    ("registry/works_at/edit", {"category": "work", "kind": "relation"}, Role.ADMIN),
    ("registry/works_at/flags", {"flag": "exclude_from_prompt", "value": "1"}, Role.ADMIN),
    ("registry/works_at/unregister", {}, Role.ADMIN),
    ("registry/import", {}, Role.ADMIN),
    ("entities/seed/one", {"name": "Globex", "type": "organisation", "scope": "x"}, Role.ADMIN),
    ("entities/seed/upload", {}, Role.ADMIN),
    ("memory/import", {"format": "memory"}, Role.ADMIN),
    ("entities/{alex}/edit", {"name": "Alexandra", "type": "person"}, Role.CURATOR),
    ("entities/{alex}/delete", {}, Role.CURATOR),
    ("tokens/create", {"user": "1", "grants": "read:*"}, Role.ADMIN),
    ("tokens/reconcile", {"name": "OpenRefine", "scope": "*"}, Role.ADMIN),
    ("facts/retract", {"fact": ["1"]}, Role.CURATOR),
    ("facts/{fact}/retract", {}, Role.CURATOR),
    ("facts/{fact}/restore", {}, Role.CURATOR),
    ("facts/{fact}/correct", {"value": "CEO"}, Role.CURATOR),
    ("facts/{fact}/edit", {"confidence": "0.5"}, Role.CURATOR),
    ("turns/999999/retract", {"preview": "1"}, Role.CURATOR),
    ("review/decide", {"action": "reject", "fact": ["1"]}, Role.CURATOR),
    ("review/policy", {"fact_review": "all"}, Role.ADMIN),
    ("items/999999/delete", {}, Role.CURATOR),
    ("items/extract", {"item_extract": "on"}, Role.ADMIN),
    ("constraints/retract", {"fact": "1"}, Role.CURATOR),
    ("constraints/correct", {"fact": "1", "value": "CEO"}, Role.CURATOR),
    (
        "constraints/except",
        {"predicate": "knows", "constraint": "value_type", "entity": "1"},
        Role.CURATOR,
    ),
    ("registry/works_at/constraints", {"constraints": "[]"}, Role.ADMIN),
]


def _url(base: str, path: str, memory: Memory, event: int = 0) -> str:
    return f"{base}/" + path.format(
        alex=memory.alex.pk,
        conflict=memory.conflict.pk,
        event=event or 999999,
        run=_run(memory),
        fact=_fact(memory),
    )


def _fact(memory: Memory) -> int:
    """One of Alex's facts."""
    return Fact.objects.filter(subject=memory.alex).order_by("pk").values_list("pk", flat=True)[0]


def _run(memory: Memory) -> int:
    """A failed run in the memory's context (made once per test)."""
    from memory.models import Run

    run, _ = Run.objects.get_or_create(
        context=memory.alex.context, scope="org/acme", mode="none", outcome="failed"
    )
    return run.pk


def _snapshot() -> tuple[int, int, list[tuple[str, str]]]:
    """Enough of the database to see that a refused action changed nothing."""
    statuses = sorted(Predicate.objects.values_list("name", "status"))
    return AuditEvent.objects.count(), Fact.objects.count(), statuses


@pytest.mark.parametrize("path", PAGES + ADMIN_PAGES)
def test_anonymous_is_sent_to_login(client: Client, base: str, memory: Memory, path: str) -> None:
    url = _url(base, path, memory)

    response = client.get(url)

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")


@pytest.mark.parametrize("path", PAGES + ADMIN_PAGES)
def test_non_member_gets_404(
    make_user: Callable[..., Any], base: str, memory: Memory, path: str
) -> None:
    outsider = Client()
    outsider.force_login(make_user("outsider"))

    response = outsider.get(_url(base, path, memory))

    assert response.status_code == 404
    assert "not found" in page(response).lower()


def test_unknown_context_is_404(viewer: Client) -> None:
    assert viewer.get("/c/no-such-context/").status_code == 404


@pytest.mark.parametrize("path", PAGES)
def test_viewer_reads_every_page(viewer: Client, base: str, memory: Memory, path: str) -> None:
    response = viewer.get(_url(base, path, memory))

    assert response.status_code == 200
    assert 'aria-current="page"' in page(response)  # inside the dashboard frame


def test_member_of_another_context_cannot_open_this_one(
    make_context: Callable[..., Context], make_user: Callable[..., Any], base: str, memory: Memory
) -> None:
    other = Client()
    other.force_login(make_user(context=make_context("elsewhere"), role=Role.ADMIN))

    assert other.get(f"{base}/drift/").status_code == 404
    assert other.post(f"{base}/drift/works_for/resolve", {"action": "reject"}).status_code == 404


@pytest.mark.parametrize(("path", "data", "needs"), ACTIONS)
def test_anonymous_actions_are_sent_to_login(
    client: Client, base: str, memory: Memory, path: str, data: dict[str, Any], needs: Role
) -> None:
    before = _snapshot()

    response = client.post(_url(base, path, memory), data)

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
    assert _snapshot() == before


@pytest.mark.parametrize(("path", "data", "needs"), ACTIONS)
def test_actions_refuse_a_role_below_the_one_they_need(
    client_for: Callable[..., Client],
    base: str,
    memory: Memory,
    path: str,
    data: dict[str, Any],
    needs: Role,
) -> None:
    event = AuditEvent.objects.create(
        context=memory.alex.context,
        actor_label="x",
        action="predicate_alias_add",
        target_type="predicate",
        target_id="works_at",
        summary="s",
        undo={"op": "predicate_alias_remove", "name": "works_at", "alias": "employed_by"},
    )
    below = Role.VIEWER if needs == Role.CURATOR else Role.CURATOR
    before = _snapshot()

    response = client_for(below).post(_url(base, path, memory, event.pk), data)

    assert response.status_code == 403
    assert f"needs the {needs} role" in page(response)
    assert _snapshot() == before


@pytest.mark.parametrize(("path", "data", "needs"), ACTIONS)
def test_actions_refuse_get(
    admin: Client, base: str, memory: Memory, path: str, data: dict[str, Any], needs: Role
) -> None:
    assert admin.get(_url(base, path, memory)).status_code == 405


def test_curator_cannot_export_the_registry(curator: Client, base: str) -> None:
    assert curator.get(f"{base}/registry/export.json").status_code == 403


def test_refusal_to_htmx_is_swapped_into_the_flash_area(
    viewer: Client, base: str, memory: Memory
) -> None:
    response = viewer.post(
        f"{base}/drift/works_for/resolve", {"action": "reject"}, HTTP_HX_REQUEST="true"
    )

    assert response.status_code == 403
    assert response["HX-Retarget"] == "#flash"
    assert "<html" not in page(response)
    assert "needs the curator role" in page(response)


def test_tabs_link_every_screen_and_hide_pages_that_do_not_exist_yet(
    viewer: Client, base: str
) -> None:
    html = page(viewer.get(f"{base}/"))

    for path in ("drift/", "duplicates/", "conflicts/", "registry/", "entities/", "audit/"):
        assert f'href="{base}/{path}"' in html
    assert f'href="{base}/entities/seed/"' in html


def test_context_switcher_lists_only_my_contexts(
    make_context: Callable[..., Context], make_user: Callable[..., Any], context: Context
) -> None:
    from memory.models import ContextMembership

    user = make_user(context=context)
    mine = make_context("second-ctx")
    make_context("not-mine")
    ContextMembership.objects.create(user=user, context=mine, role=Role.VIEWER)
    client = Client()
    client.force_login(user)

    html = page(client.get(f"/c/{context.slug}/"))

    assert 'href="/c/second-ctx/"' in html
    assert "not-mine" not in html


def test_every_dashboard_url_has_a_permission_test() -> None:
    from django.urls import resolve

    from curation.urls import context_patterns

    paths = PAGES + ADMIN_PAGES + [path for path, _, _ in ACTIONS]
    ids = {"alex": 1, "conflict": 1, "event": 1, "run": 1, "fact": 1}
    covered = {resolve("/c/x/" + p.format(**ids)).url_name for p in paths}
    covered |= {"seed-job", "seed-job-report", "seed-job-retry"}  # test_seeding: need a job
    covered |= {"drift-definition"}  # test_drift: a curator's form, not a page
    covered |= {"document", "document-delete", "document-add"}  # test_documents
    covered |= {"token-revoke"}  # test_tokens: needs a token
    covered |= {"memory-job", "memory-job-retry"}  # test_memory_page: need a job
    covered |= {"conversation"}  # test_facts_pages: needs a thread
    covered |= {"item"}  # test_items_page: needs an item
    assert {p.name for p in context_patterns} == covered
