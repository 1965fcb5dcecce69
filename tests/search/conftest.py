from __future__ import annotations

from collections.abc import Callable

import pytest

from memory.domain.access import ContextAccess
from memory.kernel.scopes import Grants
from memory.models import Context, Document, Role
from memory.services.ingest.documents import document_create, documents_embed

# (title, text, scope): one shared corpus for the ordering and scope tests.
CORPUS = [
    (
        "Refund policy",
        "Customers returning purchases within 30 days receive a full refund to their card.",
        "org/acme",
    ),
    (
        "Shipping times",
        "Standard shipping takes five days. Express shipping takes one day.",
        "org/acme",
    ),
    (
        "Laptop warranty",
        "The MLWK3LL/A laptop carries a one-year warranty covering battery faults.",
        "org/acme",
    ),
    (
        "Alex's notes",
        "Alex prefers express shipping and asked about a refund for a returned laptop.",
        "org/acme/user/alex",
    ),
    (
        "Other company",
        "Other company refund rules: no refunds on returning purchases after a week.",
        "org/other",
    ),
]


@pytest.fixture
def corpus(access: ContextAccess) -> dict[str, Document]:
    """The corpus, indexed and embedded; documents by title."""
    documents = {
        title: document_create(access=access, title=title, text=text, scope=scope)
        for title, text, scope in CORPUS
    }
    documents_embed(document_ids=[d.pk for d in documents.values()])
    return documents


@pytest.fixture
def reader(context: Context) -> Callable[..., ContextAccess]:
    """Access for a viewer holding exactly the given grants."""

    def make(*grants: str) -> ContextAccess:
        return ContextAccess(
            context=context, user=None, role=Role.VIEWER, grants=Grants.from_strings(list(grants))
        )

    return make
