"""Which entity a name means (resolve_entity_name): exact before key, the caller's own
scope on a tie, then the oldest entity; never the most recently updated."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rest_framework.test import APIClient

from memory.domain.access import ContextAccess
from memory.kernel.scopes import Grants
from memory.models import Context, Entity, Role
from memory.selectors.entity_lookup import resolve_entity_name
from memory.services.entities.writes import entity_update, entity_upsert
from tests.api.conftest import assert_error


def _acme_twins(access: ContextAccess) -> tuple[Entity, Entity]:
    """The entity "Acme Corp" in org/acme and "ACME Inc." in org/other: both have the key ``acme``;
    the other one is edited last, as the unrelated edit that used to flip the answer."""
    corp = entity_upsert(
        access=access, name="Acme Corp", type="organisation", scope="org/acme"
    ).entity
    inc = entity_upsert(
        access=access, name="ACME Inc.", type="organisation", scope="org/other"
    ).entity
    entity_update(access=access, entity=inc, aliases=["Acme Incorporated"])
    return corp, inc


def test_an_exact_name_beats_a_key_match_whatever_was_edited_last(
    access: ContextAccess,
) -> None:
    corp, inc = _acme_twins(access)
    found = resolve_entity_name(access=access, ref="Acme Corp")
    assert (found.entity.pk, found.matched_by) == (corp.pk, "name")
    assert [e.pk for e in found.other_matches] == [inc.pk]
    assert resolve_entity_name(access=access, ref="acme inc.").entity.pk == inc.pk
    assert resolve_entity_name(access=access, ref="ACME INCORPORATED").matched_by == "alias"
    entity_update(access=access, entity=corp, attributes={"founded": 1949})
    assert resolve_entity_name(access=access, ref="ACME Inc.").entity.pk == inc.pk


def test_a_key_only_tie_prefers_the_callers_scope_then_the_oldest(
    access: ContextAccess,
) -> None:
    corp, inc = _acme_twins(access)
    # "Acme" is neither name exactly: a key tie. Full grants: the oldest wins.
    found = resolve_entity_name(access=access, ref="Acme")
    assert (found.entity.pk, found.matched_by) == (corp.pk, "key")
    entity_update(access=access, entity=corp, attributes={"edited": True})
    assert resolve_entity_name(access=access, ref="Acme").entity.pk == corp.pk
    # The scope the caller works in (or an ancestor of it) comes first...
    own = resolve_entity_name(access=access, ref="Acme", prefer_scope="org/other/user/sam")
    assert own.entity.pk == inc.pk and [e.pk for e in own.other_matches] == [corp.pk]
    # ...then a scope the caller's grants may write to.
    writer = ContextAccess(
        context=access.context,
        user=None,
        role=access.role,
        grants=Grants.from_strings(["read:*", "write:org/other/*"]),
    )
    assert resolve_entity_name(access=writer, ref="Acme").entity.pk == inc.pk


def test_context_by_entity_name_answers_the_entity_named_so(
    context: Context,
    access: ContextAccess,
    api_client_for: Callable[..., APIClient],
) -> None:
    corp, inc = _acme_twins(access)
    api = api_client_for(context, role=Role.VIEWER, grants=["read:*"])
    base = f"/api/v1/contexts/{context.slug}"
    body: dict[str, Any] = api.post(
        f"{base}/context", {"entity": "Acme Corp", "mode": "bm25"}, format="json"
    ).json()
    assert [e["id"] for e in body["entities"]] == [corp.pk]
    body = api.post(
        f"{base}/context", {"entity": "ACME Inc.", "mode": "bm25"}, format="json"
    ).json()
    assert [e["id"] for e in body["entities"]] == [inc.pk]
    assert_error(
        api.post(f"{base}/context", {"entity": "Acme Holdings Ltd"}, format="json"),
        404,
        "entity_not_found",
    )
