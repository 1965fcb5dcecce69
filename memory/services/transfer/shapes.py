"""The registry's constraints as SHACL shapes (Turtle), over the RDF export's IRIs
(services/transfer/rdf.py).

Every constraint is one node shape, ``…/predicates/shapes#{predicate}-{type}``, targeting
the subjects of its predicate, with ``sh:severity`` from its status (mandatory →
``sh:Violation``, suggestion → ``sh:Warning``), so a validation result names its rule by
its ``sh:sourceShape``. What core SHACL states — single value (``sh:maxCount``), format
(``sh:pattern``), subject and value type (``sh:class``), allowed values (``sh:in``), range
(``sh:minInclusive`` / ``sh:maxInclusive``) — is stated so, inside an ``sh:or`` whose
first branch is ``sh:in`` of the exceptions when there are any. Symmetric, inverse,
distinct values, conflicts-with and requires are SHACL-SPARQL (``sh:sparql``) selects,
the exceptions filtered out. A shape reports one result per violating subject, as the
constraint report has one row per subject (distinct values: one per subject and other
subject sharing the value).
"""

from __future__ import annotations

from typing import Any

from rdflib import RDF, BNode, Graph, Namespace, URIRef
from rdflib import Literal as RdfLiteral
from rdflib.collection import Collection
from rdflib.term import Node

from memory.domain.access import ContextAccess
from memory.models import Predicate, PredicateKind, PredicateStatus
from memory.services.transfer.rdf import RdfNames, rdf_literal

SH = Namespace("http://www.w3.org/ns/shacl#")
SPARQL_TYPES = frozenset({"symmetric", "inverse", "distinct_values", "conflicts_with", "requires"})


def registry_shapes_turtle(*, access: ContextAccess, base: str) -> str:
    """The shapes of every registered predicate's constraints, as Turtle."""
    names = RdfNames(base)
    graph = Graph()
    graph.bind("sh", SH)
    predicates = (
        Predicate.objects.filter(context=access.context, status=PredicateStatus.REGISTERED)
        .exclude(constraints=[])
        .order_by("name")
    )
    for predicate in predicates:
        for rule in predicate.constraints:
            _shape(graph, names, predicate, rule)
    return str(graph.serialize(format="turtle"))


def _shape(graph: Graph, names: RdfNames, predicate: Predicate, rule: dict[str, Any]) -> None:
    ctype = rule["type"]
    shape = names.shape(predicate.name, ctype)
    path = names.predicate(predicate.name)
    graph.add((shape, RDF.type, SH.NodeShape))
    graph.add((shape, SH.targetSubjectsOf, path))
    severity = SH.Violation if rule["status"] == "mandatory" else SH.Warning
    graph.add((shape, SH.severity, severity))
    graph.add((shape, SH.name, RdfLiteral(f"{predicate.name}: {ctype}")))
    exceptions = [names.entity(e) for e in rule["exceptions"]]
    if ctype in SPARQL_TYPES:
        select = _sparql(names, predicate, rule, exceptions)
        constraint = BNode()
        graph.add((shape, SH.sparql, constraint))
        graph.add((constraint, SH.select, RdfLiteral(select)))
        graph.add((constraint, SH.message, RdfLiteral(f"{predicate.name}: {ctype} broken")))
        return
    branches = [_in(graph, exceptions)] if exceptions else []
    branches += _core(graph, names, predicate, rule, path)
    graph.add((shape, SH["or"], _list(graph, branches)))


def _core(
    graph: Graph, names: RdfNames, predicate: Predicate, rule: dict[str, Any], path: URIRef
) -> list[Node]:
    """The branches that state a core constraint (any one holding is enough)."""
    ctype = rule["type"]
    if ctype == "subject_type":
        return [_class(graph, names, t) for t in rule["types"]]
    prop = BNode()
    graph.add((prop, SH.path, path))
    if ctype == "single_value":
        graph.add((prop, SH.maxCount, RdfLiteral(1)))
    elif ctype == "format":
        graph.add((prop, SH.pattern, RdfLiteral(f"^(?:{rule['pattern']})$")))
    elif ctype == "value_type":
        classes = [_class(graph, names, t) for t in rule["types"]]
        graph.add((prop, SH["or"], _list(graph, classes)))
    elif ctype == "allowed_values":
        values: list[Node] = (
            [names.entity(v) for v in rule["values"]]
            if predicate.kind == PredicateKind.RELATION
            else [rdf_literal(v, str(v)) for v in rule["values"]]
        )
        graph.add((prop, SH["in"], _list(graph, values)))
    elif ctype == "range":
        for key, term in (("min", SH.minInclusive), ("max", SH.maxInclusive)):
            if rule[key] is not None:
                graph.add((prop, term, rdf_literal(rule[key], str(rule[key]))))
    holder = BNode()
    graph.add((holder, SH.property, prop))
    return [holder]


def _sparql(
    names: RdfNames, predicate: Predicate, rule: dict[str, Any], exceptions: list[URIRef]
) -> str:
    """A SELECT of ``$this`` (and, for distinct values, ``?value``: the other subject)
    per violating subject."""
    ctype = rule["type"]
    p = names.predicate(predicate.name).n3()
    q = names.predicate(rule["predicate"]).n3() if "predicate" in rule else ""
    excepted = ", ".join(e.n3() for e in exceptions)
    unless = f"FILTER ($this NOT IN ({excepted}))" if exceptions else ""
    if ctype == "symmetric":
        body = f"$this {p} ?o . FILTER isIRI(?o) FILTER NOT EXISTS {{ ?o {p} $this }}"
    elif ctype == "inverse":
        body = f"$this {p} ?o . FILTER isIRI(?o) FILTER NOT EXISTS {{ ?o {q} $this }}"
    elif ctype == "conflicts_with":
        body = f"$this {p} ?v . $this {q} ?w ."
    elif ctype == "requires":
        body = f"$this {p} ?v . FILTER NOT EXISTS {{ $this {q} ?w }}"
    else:  # distinct_values
        also = f"FILTER (?value NOT IN ({excepted}))" if exceptions else ""
        return (
            f"SELECT DISTINCT $this ?value WHERE {{ $this {p} ?v . ?value {p} ?v . "
            f"FILTER (?value != $this) {unless} {also} }}"
        )
    return f"SELECT DISTINCT $this WHERE {{ {body} {unless} }}"


def _class(graph: Graph, names: RdfNames, entity_type: str) -> Node:
    node = BNode()
    graph.add((node, SH["class"], names.type(entity_type)))
    return node


def _in(graph: Graph, members: list[URIRef]) -> Node:
    node = BNode()
    graph.add((node, SH["in"], _list(graph, list(members))))
    return node


def _list(graph: Graph, items: list[Node]) -> Node:
    head = BNode()
    Collection(graph, head, items)
    return head
