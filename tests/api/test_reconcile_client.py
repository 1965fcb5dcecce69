"""The reconciliation service through a real client package (``reconciler``, which
OpenRefine-style batches a pandas column to a 0.2 service over HTTP), against this
server on localhost through a reconciliation key URL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest
from reconciler import reconcile

from memory.domain.access import ContextAccess
from memory.kernel.scopes import Grants
from memory.models import Context, Role
from memory.services.entities.writes import entity_upsert
from memory.services.tokens import reconcile_key_create


@pytest.mark.django_db(transaction=True)
def test_reconciler_package_matches_a_column(
    live_server: Any, context: Context, make_user: Callable[..., Any]
) -> None:
    admin = make_user(context=context, role=Role.ADMIN)
    access = ContextAccess(context=context, user=admin, role=Role.ADMIN, grants=Grants.everything())
    ids = {
        name: entity_upsert(access=access, name=name, scope="org/acme", type="person").entity.pk
        for name in ("Ada Lovelace", "Grace Hopper", "Alan Turing")
    }
    key = reconcile_key_create(access=access, name="reconciler").raw
    endpoint = f"{live_server.url}/api/v1/contexts/{context.slug}/reconcile/k/{key}"
    column = pd.Series(["Ada Lovelace", "Grace Hoper", "alan turing"])
    found = reconcile(column, type_id="person", reconciliation_endpoint=endpoint)
    by_input = dict(zip(found["input_value"], found["id"], strict=True))
    assert by_input == {
        "Ada Lovelace": str(ids["Ada Lovelace"]),
        "Grace Hoper": str(ids["Grace Hopper"]),
        "alan turing": str(ids["Alan Turing"]),
    }
    exact = found.loc[found["input_value"] == "Ada Lovelace"].iloc[0]
    # An exact name that one person of the asked type holds is a match (decision 0118);
    # a slip still waits for a look.
    assert exact["score"] > 90 and exact["match"]
    slip = found.loc[found["input_value"] == "Grace Hoper"].iloc[0]
    assert not slip["match"]
