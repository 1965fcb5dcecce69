"""A context's current graph as RDF (Turtle or JSON-LD), streamed.

IRIs are the API's own addresses under the context, so they are stable for as long as
the records are: an entity is ``…/contexts/{ctx}/entities/{id}``, a predicate
``…/predicates/{name}``, an entity type ``…/types/{type}``. Each live entity the caller
may read is typed (``rdf:type``) and labelled (``rdfs:label``); each current, trusted fact
it may read is one triple — a relation (or an action with an object) to the object
entity, anything else to a typed literal (``rdf_literal``). Only the facts agents are
told leave: history, pending and rejected claims stay in the JSON-lines export.

The triples are written by hand, a chunk of rows at a time, with rdflib's term syntax for
the escaping: a graph of a million facts is never built in memory.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import date
from decimal import Decimal
from typing import Any, Literal

from rdflib import RDF, RDFS, XSD, URIRef
from rdflib import Literal as RdfLiteral

from memory.domain.access import ContextAccess
from memory.models import Entity, Fact, FactStatus, FactTrust

RdfFormat = Literal["turtle", "jsonld"]
RDF_FORMATS: tuple[str, ...] = ("turtle", "jsonld")
CHUNK_ROWS = 2_000
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")


class RdfNames:
    """The IRIs of one context's records, under ``base`` (the context's API address,
    ending in ``/``)."""

    def __init__(self, base: str) -> None:
        self.base = base

    def entity(self, entity_id: int) -> URIRef:
        return URIRef(f"{self.base}entities/{entity_id}")

    def predicate(self, name: str) -> URIRef:
        return URIRef(f"{self.base}predicates/{name}")

    def type(self, name: str) -> URIRef:
        return URIRef(f"{self.base}types/{name}")

    def shape(self, predicate: str, constraint: str) -> URIRef:
        return URIRef(f"{self.base}predicates/shapes#{predicate}-{constraint}")


def rdf_literal(value: Any, value_text: str) -> RdfLiteral:
    """A fact's value as a typed literal: JSON numbers as xsd:integer / xsd:decimal,
    true/false as xsd:boolean, a ``YYYY-MM-DD`` text that is a date as xsd:date, other
    text as a plain string, and anything else (objects, lists) as its JSON text. The
    constraint report's range test reads values the same way (selectors/constraints.py)."""
    if isinstance(value, bool):
        return RdfLiteral(value)
    if isinstance(value, int):
        return RdfLiteral(str(value), datatype=XSD.integer)
    if isinstance(value, float):
        return RdfLiteral(format(Decimal(repr(value)), "f"), datatype=XSD.decimal)
    if isinstance(value, str):
        if _DATE_RE.fullmatch(value):
            try:
                date.fromisoformat(value)
            except ValueError:
                return RdfLiteral(value)
            return RdfLiteral(value, datatype=XSD.date)
        return RdfLiteral(value)
    return RdfLiteral(value_text)


def rdf_export_lines(*, access: ContextAccess, base: str, format: RdfFormat) -> Iterator[str]:
    """The graph as text, in pieces (see the module doc)."""
    names = RdfNames(base)
    if format == "turtle":
        return _turtle(access, names)
    return _jsonld(access, names)


def _entities(access: ContextAccess) -> Iterator[tuple[int, str, str]]:
    rows = (
        Entity.objects.filter(access.grants.read_q(), context=access.context, merged_into=None)
        .order_by("pk")
        .values_list("pk", "name", "type")
    )
    yield from rows.iterator(chunk_size=CHUNK_ROWS)


def _facts(access: ContextAccess) -> Iterator[tuple[int, str, int | None, Any, str]]:
    rows = (
        Fact.objects.filter(
            access.grants.read_q(),
            context=access.context,
            status=FactStatus.CURRENT,
            trust=FactTrust.TRUSTED,
        )
        .order_by("pk")
        .values_list("subject_id", "predicate__name", "object_id", "value", "value_text")
    )
    yield from rows.iterator(chunk_size=CHUNK_ROWS)


def _turtle(access: ContextAccess, names: RdfNames) -> Iterator[str]:
    yield (
        f"# The current graph of context {access.context.slug}\n"
        f"@prefix rdf: <{RDF}> .\n@prefix rdfs: <{RDFS}> .\n@prefix xsd: <{XSD}> .\n\n"
    )
    a, label = RDF.type.n3(), RDFS.label.n3()
    lines: list[str] = []
    for pk, name, type_ in _entities(access):
        iri = names.entity(pk).n3()
        lines.append(
            f"{iri} {a} {names.type(type_).n3()} ;\n    {label} {RdfLiteral(name).n3()} .\n"
        )
        if len(lines) >= CHUNK_ROWS:
            yield "".join(lines)
            lines = []
    for subject_id, predicate, object_id, value, value_text in _facts(access):
        obj = (
            names.entity(object_id).n3()
            if object_id is not None
            else rdf_literal(value, value_text).n3()
        )
        lines.append(f"{names.entity(subject_id).n3()} {names.predicate(predicate).n3()} {obj} .\n")
        if len(lines) >= CHUNK_ROWS:
            yield "".join(lines)
            lines = []
    yield "".join(lines)


def _jsonld(access: ContextAccess, names: RdfNames) -> Iterator[str]:
    """JSON-LD in expanded node form: one node object per entity, then one per fact (a
    node may appear several times; JSON-LD merges nodes with the same ``@id``)."""
    context = {"rdfs": str(RDFS), "xsd": str(XSD)}
    yield '{"@context": ' + json.dumps(context) + ', "@graph": ['
    first = True
    pieces: list[str] = []
    for pk, name, type_ in _entities(access):
        node: dict[str, Any] = {
            "@id": str(names.entity(pk)),
            "@type": str(names.type(type_)),
            "rdfs:label": name,
        }
        pieces.append(("" if first else ",") + json.dumps(node, ensure_ascii=False))
        first = False
        if len(pieces) >= CHUNK_ROWS:
            yield "".join(pieces)
            pieces = []
    for subject_id, predicate, object_id, value, value_text in _facts(access):
        if object_id is not None:
            term: dict[str, Any] = {"@id": str(names.entity(object_id))}
        else:
            literal = rdf_literal(value, value_text)
            term = {"@value": str(literal)}
            if literal.datatype is not None and literal.datatype != XSD.string:
                term["@type"] = str(literal.datatype)
        node = {"@id": str(names.entity(subject_id)), str(names.predicate(predicate)): term}

        pieces.append(("" if first else ",") + json.dumps(node, ensure_ascii=False))
        first = False
        if len(pieces) >= CHUNK_ROWS:
            yield "".join(pieces)
            pieces = []
    yield "".join(pieces) + "]}"
