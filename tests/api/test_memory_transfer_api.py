"""Export and import of a whole memory: the round trip is exact (ids new, every row and
every reference equal), through the API (a job with progress) and the commands; bad
files and wrong callers write nothing."""

from __future__ import annotations

import contextlib
import io
import json
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone
from rest_framework.test import APIClient

from memory.domain.access import ContextAccess, system_access
from memory.infra.restore_writes import (
    ForeignKeyBroken,
    foreign_keys_check,
    replica_role_enter,
    replica_role_on,
)
from memory.models import (
    Conflict,
    Context,
    Entity,
    Fact,
    FactStatus,
    ImportJob,
    Predicate,
    PredicateUsage,
    Role,
    Turn,
)
from memory.models.duplicate import DuplicateKey
from memory.search.indexing import search_index_rebuild
from memory.search.models import SearchDoc, SearchStats, SearchTerm
from memory.selectors.search import TARGETS, search
from memory.services.entities.writes import entity_upsert
from memory.services.facts.retraction import fact_retract
from memory.services.facts.write import fact_write
from memory.services.ingest.documents import document_create
from memory.services.merges.merge import entity_merge
from memory.services.registry.predicates import predicate_alias_add
from memory.services.transfer.export import memory_export_lines
from memory.services.transfer.format import KIND_BY_NAME
from memory.services.transfer.importer import memory_import
from tests.api.conftest import assert_error
from tests.ingest.conftest import extraction

pytestmark = pytest.mark.django_db
NDJSON = "application/x-ndjson"


@pytest.fixture
def immediate_tasks(settings: Any) -> None:
    """Run enqueued tasks at once, in the test's process."""
    settings.TASKS = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}


@pytest.fixture
def source(
    make_context: Callable[..., Context], api_client_for: Callable[..., APIClient]
) -> Context:
    """A memory with something of every kind: a merge, identifiers, attributes, a
    superseded value, a retracted fact, validity, a contested value and its conflict,
    turns with the facts extracted from them, a document with chunks and keywords."""
    context = make_context("source")
    access = system_access(context)

    def entity(name: str, type_: str = "person", **fields: Any) -> Entity:
        return entity_upsert(
            access=access, name=name, scope="org/acme", type=type_, **fields
        ).entity

    ada = entity(
        "Ada Lovelace",
        aliases=["Augusta Ada King"],
        identifiers=[{"kind": "email", "value": "ada@example.org"}],
        # An integer past 64 bits: JSON holds it exactly, and so must the round trip.
        attributes={
            "date_of_birth": "1815-12-10",
            "notes": {"nested": [1, 2], "serial": 2**70 + 1},
        },
    )
    twin = entity("Ada Lovelace-King")
    entity_merge(access=access, survivor_id=ada.pk, merged_ids=[twin.pk])
    acme = entity("Acme", "organisation", identifiers=[{"kind": "domain", "value": "acme.io"}])
    now = timezone.now()
    fact_write(
        access=access,
        subject=ada,
        predicate="works_at",
        object=acme,
        valid_from=now - timedelta(days=400),
        valid_until=now + timedelta(days=30),
    )
    fact_write(access=access, subject=ada, predicate="current_title", value="Analyst")
    fact_write(access=access, subject=ada, predicate="current_title", value="Chief Analyst")
    fact_write(access=access, subject=ada, predicate="current_title", value="Poet", confidence=0.3)
    doomed = fact_write(access=access, subject=acme, predicate="located_in", value="Leeds")
    fact_retract(access=access, fact=doomed.fact, reason="wrong city")
    works_at = Predicate.objects.get(context=context, name="works_at")
    predicate_alias_add(access=access, predicate=works_at, alias="employed_by")
    document_create(
        access=access,
        title="Analytical Engine notes",
        text="The Analytical Engine weaves algebraic patterns. " * 40,
        scope="org/acme",
        metadata={"source": "archive"},
    )
    api = api_client_for(context)
    triples = extraction(
        entities=[{"name": "Caroline", "type": "person"}, {"name": "Acme", "type": "organisation"}],
        relations=[{"subject": "Caroline", "predicate": "works_at", "object": "Acme"}],
    )
    response = api.post(
        f"/api/v1/contexts/{context.slug}/memories",
        {
            "text": "Caroline works at Acme.",
            "scope": "org/acme",
            "infer": "triples",
            "triples": triples,
            "wait": True,
            "speaker": "Mel",
            "thread": "conv-1",
            "said_at": "2024-05-08T13:56:00.123456+00:00",
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    return context


def _records(context: Context) -> list[dict[str, Any]]:
    return [json.loads(line) for line in memory_export_lines(access=system_access(context))]


def assert_same_memory(a: Context, b: Context) -> None:
    """Every exported row of ``b`` equals ``a``'s, field by field, once ids are mapped
    (rows keep their order: new ids follow the old ones)."""
    first, second = _records(a), _records(b)
    assert first[0]["record"] == second[0]["record"] == "header"
    assert first[-1] == second[-1]  # the counts
    ids: dict[str, dict[int, int]] = {}
    by_kind_a: dict[str, list[dict[str, Any]]] = {}
    by_kind_b: dict[str, list[dict[str, Any]]] = {}
    for record in first[1:-1]:
        by_kind_a.setdefault(record["record"], []).append(record)
    for record in second[1:-1]:
        by_kind_b.setdefault(record["record"], []).append(record)
    assert by_kind_a.keys() == by_kind_b.keys()
    for kind, rows in by_kind_a.items():
        if "id" in rows[0]:
            ids[kind] = {x["id"]: y["id"] for x, y in zip(rows, by_kind_b[kind], strict=True)}
    for kind, rows in by_kind_a.items():
        if kind not in KIND_BY_NAME:
            assert rows == by_kind_b[kind]
            continue
        references = {
            f.attname: next(k.name for k in KIND_BY_NAME.values() if k.model is f.related_model)
            for f in KIND_BY_NAME[kind].fields()
            if f.is_relation and any(k.model is f.related_model for k in KIND_BY_NAME.values())
        }
        for x, y in zip(rows, by_kind_b[kind], strict=True):
            mapped = dict(x)
            mapped["id"] = ids[kind][x["id"]]
            for name, target in references.items():
                if x[name] is not None:
                    mapped[name] = ids[target][x[name]]
            # Users and runs are the installation's, not the memory's.
            for name in ("created_by_id", "resolved_by_id", "run_id"):
                if name in mapped:
                    mapped[name] = None
            assert y == mapped, kind


def test_round_trip_through_the_api_is_exact(
    source: Context,
    make_context: Callable[..., Context],
    api_client_for: Callable[..., APIClient],
    django_capture_on_commit_callbacks: Any,
    immediate_tasks: None,
) -> None:
    exported = api_client_for(source).get("/api/v1/contexts/source/export")
    assert exported.status_code == 200
    assert exported["Content-Type"] == "application/x-ndjson"
    # DRF's stubs type every test-client response as a Response: this one streams.
    body = b"".join(exported.streaming_content).decode()  # type: ignore[attr-defined]
    kinds = [json.loads(line)["record"] for line in body.splitlines()]
    assert kinds[0] == "header" and kinds[-1] == "end"
    assert {"entity", "identifier", "fact", "turn", "document", "chunk", "keyword"} <= set(kinds)
    assert {"keyword_link", "conflict", "predicate", "predicate_alias"} <= set(kinds)

    target = make_context("target")
    admin = api_client_for(target)
    with django_capture_on_commit_callbacks(execute=True):
        started = admin.post("/api/v1/contexts/target/import", body, content_type=NDJSON)
    assert started.status_code == 202, started.content
    job = admin.get(started["Location"]).json()
    assert job["status"] == "succeeded", job
    assert job["percent"] == 100 and job["done"] == len(kinds)
    assert_same_memory(source, target)
    # New ids; the same statements, status, validity and history.
    assert not set(Fact.objects.filter(context=source).values_list("pk", flat=True)) & set(
        Fact.objects.filter(context=target).values_list("pk", flat=True)
    )
    statuses = sorted(Fact.objects.filter(context=target).values_list("status", flat=True))
    assert statuses == sorted(Fact.objects.filter(context=source).values_list("status", flat=True))
    assert {FactStatus.SUPERSEDED, FactStatus.RETRACTED, FactStatus.CONTESTED} <= set(statuses)
    assert Conflict.objects.filter(context=target).count() == 1
    assert Entity.objects.filter(context=target, merged_into__isnull=False).count() == 1
    # Imported rows are searchable and reconcilable at once.
    found = admin.post(
        "/api/v1/contexts/target/search",
        {"query": "Analytical Engine", "mode": "bm25"},
        format="json",
    )
    assert found.status_code == 200 and found.json()["results"]
    queries = json.dumps({"q": {"query": "Ada Lovelace", "properties": [
        {"pid": "email", "v": "ada@example.org"}]}})  # fmt: skip
    matched = admin.get("/api/v1/contexts/target/reconcile", {"queries": queries}).json()
    ada = Entity.objects.get(context=target, name="Ada Lovelace")
    assert matched["q"]["result"][0]["id"] == str(ada.pk)


def _corpus(context: Context) -> dict[str, Any]:
    """A context's BM25 index as ranking reads it: each corpus's size and length, and
    each term's document frequency (the pruning bounds may be looser where items were
    re-indexed: a stale bound is still a bound)."""
    return {
        "stats": sorted(
            SearchStats.objects.filter(context=context).values_list(
                "target", "doc_count", "total_length"
            )
        ),
        "terms": sorted(
            SearchTerm.objects.filter(context=context, df__gt=0).values_list("target", "text", "df")
        ),
    }


@pytest.mark.parametrize(
    ("target", "query"),
    [
        ("chunks", "algebraic patterns"),
        ("turns", "Caroline works"),
        ("facts", "current_title analyst"),
        ("entities", "Augusta King"),
    ],
)
def test_an_imported_memory_is_searched_as_the_original(
    source: Context, make_context: Callable[..., Context], target: str, query: str
) -> None:
    # The merge gave the survivor its twin's name as an alias; indexing every fact and
    # entity of the original again is what the services' own indexing makes of its rows.
    search_index_rebuild(context=source)
    imported = make_context("target")
    memory_import(
        access=system_access(imported), lines=memory_export_lines(access=system_access(source))
    )
    assert _corpus(imported) == _corpus(source)
    want = search(access=system_access(source), query=query, mode="bm25", target=target)
    got = search(access=system_access(imported), query=query, mode="bm25", target=target)
    assert want.results, "the query finds something in the original"
    assert [(r.text, r.score) for r in got.results] == [(r.text, r.score) for r in want.results]
    assert {r.type for r in got.results} == {TARGETS[target].value}


def test_commands_round_trip(source: Context, tmp_path: Path) -> None:
    path = tmp_path / "source.jsonl"
    call_command("export_memory", "--context", "source", "--output", str(path))
    out = io.StringIO()
    call_command("import_memory", str(path), "--context", "copy", "--create", stdout=out)
    assert (
        json.loads(out.getvalue())["counts"]["fact"] == Fact.objects.filter(context=source).count()
    )
    assert_same_memory(source, Context.objects.get(slug="copy"))


def _lines(context: Context) -> list[str]:
    return list(memory_export_lines(access=system_access(context)))


def _nothing_written(context: Context) -> None:
    for model in (Entity, Fact, Turn):
        assert not model.objects.filter(context=context).exists()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda lines: lines[:-1], "cut short"),
        (lambda lines: lines[:-3] + lines[-1:], "incomplete"),
        (lambda lines: ["{not json", *lines[1:]], "line 1 is not JSON"),
        (lambda lines: [*lines[:3], lines[3][:25]],
         "line 4 stops mid-record: the file looks cut short. Export the memory again"),
        (lambda lines: lines[1:], "header"),
        (lambda lines: [lines[0].replace('"version":1', '"version":9'), *lines[1:]],
         "version"),
        (lambda lines: [*lines[:2], '{"record": "spaceship"}', *lines[2:]], "spaceship"),
        (lambda lines: [lines[0], '{"record": "entity", "colour": "red"}', *lines[1:]],
         "colour"),
        (lambda lines: [x.replace('"subject_id":', '"subject_id":99999999,"x":') if
                        '"record":"fact"' in x else x for x in lines], "no field"),
        (lambda lines: [x.replace('"value_text":"Chief Analyst"', '"value_text":{"a":1}')
                        for x in lines], "wrong shape"),
        (lambda lines: [x.replace('"observed_count":1', '"observed_count":"many"')
                        for x in lines], "many"),
        (lambda lines: [json.dumps({k: v for k, v in json.loads(x).items() if k != "id"})
                        if '"record":"turn"' in x else x for x in lines], "a turn line has no id"),
    ],
)  # fmt: skip
def test_a_damaged_file_writes_nothing(
    source: Context,
    make_context: Callable[..., Context],
    damage: Callable[[list[str]], list[str]],
    message: str,
) -> None:
    target = make_context("damaged")
    from memory.kernel.errors import ValidationFailed

    with pytest.raises(ValidationFailed) as caught:
        memory_import(access=system_access(target), lines=damage(_lines(source)))
    assert message in str(caught.value)
    _nothing_written(target)


def test_a_dangling_reference_writes_nothing(
    source: Context, make_context: Callable[..., Context]
) -> None:
    target = make_context("dangling")
    lines = [x for x in _lines(source) if not ('"record":"entity"' in x and '"Acme"' in x)]
    lines = [x.replace('"entity":', '"entity":') for x in lines]
    end = json.loads(lines[-1])
    end["counts"]["entity"] -= 1
    lines[-1] = json.dumps({"record": "end", "counts": end["counts"]})
    from memory.kernel.errors import ValidationFailed

    with pytest.raises(ValidationFailed, match="is not in the file"):
        memory_import(access=system_access(target), lines=lines)
    _nothing_written(target)


def test_import_needs_an_empty_context_and_an_admin(
    source: Context,
    api_client_for: Callable[..., APIClient],
    make_context: Callable[..., Context],
) -> None:
    body = "".join(_lines(source))
    # The source is not empty.
    admin = api_client_for(source)
    refused = admin.post("/api/v1/contexts/source/import", body, content_type=NDJSON)
    assert_error(refused, 409, "context_not_empty")
    empty = make_context("empty")
    curator = api_client_for(empty, role=Role.CURATOR)
    assert_error(
        curator.post("/api/v1/contexts/empty/import", body, content_type=NDJSON),
        403,
    )
    assert_error(curator.get("/api/v1/contexts/empty/export"), 403)
    owner = api_client_for(empty)
    for bad, code in [
        ("", "missing_file"),
        ("hello\n", "invalid_export"),
        ('{"record": "entity"}\n', "invalid_export"),
    ]:
        response = owner.post("/api/v1/contexts/empty/import", bad, content_type=NDJSON)
        assert_error(response, 400, code)
    assert_error(
        owner.post("/api/v1/contexts/empty/import?format=zep", body, content_type=NDJSON),
        400,
        "invalid_format",
    )
    assert_error(owner.get("/api/v1/contexts/empty/import/999999"), 404, "import_not_found")
    assert not ImportJob.objects.filter(context=empty).exists()
    _nothing_written(empty)


def test_a_failed_import_job_says_why_and_writes_nothing(
    source: Context,
    api_client_for: Callable[..., APIClient],
    make_context: Callable[..., Context],
    django_capture_on_commit_callbacks: Any,
    immediate_tasks: None,
) -> None:
    target = make_context("half")
    lines = _lines(source)
    body = "".join(lines[:-1])  # no end line
    admin = api_client_for(target)
    with django_capture_on_commit_callbacks(execute=True):
        started = admin.post("/api/v1/contexts/half/import", body, content_type=NDJSON)
    job = admin.get(started["Location"]).json()
    assert job["status"] == "failed" and "cut short" in job["error"]
    _nothing_written(target)


def test_access_helper_is_admin_only(source: Context) -> None:
    viewer = ContextAccess(
        context=source, user=None, role=Role.VIEWER, grants=system_access(source).grants
    )
    from memory.kernel.errors import PermissionDenied

    with pytest.raises(PermissionDenied):
        next(memory_export_lines(access=viewer))


def _documents(context: Context) -> list[tuple[Any, ...]]:
    """Every search document as ranking reads it: its corpus, scope, length and terms
    (the records' ids differ between contexts; their documents must not)."""
    terms = dict(SearchTerm.objects.filter(context=context).values_list("id", "text"))
    return sorted(
        (target, scope, length, tuple(sorted(terms[t] for t in term_ids)))
        for target, scope, length, term_ids in SearchDoc.objects.filter(
            context=context
        ).values_list("target", "scope", "length", "term_ids")
    )


def _usage(context: Context) -> list[tuple[Any, ...]]:
    return sorted(
        PredicateUsage.objects.filter(context=context).values_list(
            "scope", "kind", "predicate__name", "used", "live", "last_used_at"
        )
    )


def _usage_sums(context: Context) -> dict[tuple[str, str, str], tuple[int, int]]:
    """The usage log folded per key: the original's holds a delta a write."""
    sums: dict[tuple[str, str, str], tuple[int, int]] = {}
    for scope, kind, predicate, used, live, _ in _usage(context):
        was = sums.get((scope, kind, predicate), (0, 0))
        sums[(scope, kind, predicate)] = (was[0] + used, was[1] + live)
    return {key: value for key, value in sums.items() if value != (0, 0)}


def _keys(context: Context) -> list[tuple[str, str, str, str]]:
    """The duplicate finder's blocking keys, by entity name."""
    return sorted(
        DuplicateKey.objects.filter(context=context).values_list(
            "entity__name", "entity__scope", "type", "key"
        )
    )


@contextlib.contextmanager
def _connected_as_a_plain_role() -> Iterator[None]:
    """The test's connection as a role that may write every table but not set the
    replication role, as with a DATABASE_URL of an ordinary user."""
    name = f"md_plain_{uuid.uuid4().hex[:10]}"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE ROLE {name} NOSUPERUSER")
        cursor.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {name}")
        cursor.execute(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {name}")
        cursor.execute(f"SET ROLE {name}")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET ROLE")


def test_a_restore_checked_set_based_writes_what_the_per_row_path_writes(
    source: Context, make_context: Callable[..., Context]
) -> None:
    search_index_rebuild(context=source)
    lines = _lines(source)
    set_based = make_context("set-based")
    fast = memory_import(access=system_access(set_based), lines=lines)
    # The migrated schema's insert triggers are the ones the set-based checks replace:
    # a migration changing one of them fails here until memory_import_restore.py (or
    # bm25_load.py) does what the changed trigger does.
    assert fast.set_based_checks, fast.notes
    assert not replica_role_on(), "the role is back to origin once the rows are checked"
    # An export's rows are analyzed while they are written, not read back (a change of a
    # field's type would silently send every import back to the slower path).
    assert fast.texts_analyzed_ahead
    per_row = make_context("per-row")
    with _connected_as_a_plain_role():
        slow = memory_import(access=system_access(per_row), lines=lines)
    assert not slow.set_based_checks
    assert "session_replication_role" in slow.notes[0]
    assert_same_memory(set_based, per_row)
    assert _usage(set_based) == _usage(per_row)
    assert _usage_sums(set_based) == _usage_sums(source)
    assert _corpus(set_based) == _corpus(per_row) == _corpus(source)
    # The facts' and entities' texts analyzed from the file's rows are the services' own.
    assert _documents(set_based) == _documents(per_row) == _documents(source)
    assert _keys(set_based) == _keys(per_row) == _keys(source)
    bounds = {"min_dl", "max_tf", "df", "text", "target"}
    assert sorted(SearchTerm.objects.filter(context=set_based).values_list(*bounds)) == sorted(
        SearchTerm.objects.filter(context=per_row).values_list(*bounds)
    )


def test_an_insert_trigger_without_a_set_based_equivalent_keeps_the_per_row_path(
    source: Context, make_context: Callable[..., Context]
) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION md_test_noop() RETURNS trigger LANGUAGE plpgsql "
            "AS $$ BEGIN RETURN NULL; END $$"
        )
        cursor.execute(
            "CREATE TRIGGER md_test_entity_inserted AFTER INSERT ON memory_entity "
            "FOR EACH STATEMENT EXECUTE FUNCTION md_test_noop()"
        )
    target = make_context("guarded")
    report = memory_import(access=system_access(target), lines=_lines(source))
    assert not report.set_based_checks
    assert "memory_entity.md_test_entity_inserted" in report.notes[0]
    assert_same_memory(source, target)


def test_a_row_written_with_triggers_off_is_checked_against_every_foreign_key(
    source: Context,
) -> None:
    fact = Fact.objects.filter(context=source, object__isnull=False).first()
    assert fact is not None
    with transaction.atomic():
        assert replica_role_enter()
        with connection.cursor() as cursor:
            cursor.execute("UPDATE memory_fact SET object_id = -1 WHERE id = %s", [fact.pk])
        with pytest.raises(ForeignKeyBroken, match="object_id names no row of memory_entity"):
            foreign_keys_check("memory_fact", "SELECT %s", [fact.pk])
        # A key its writer keeps by construction is not looked up; every other still is.
        foreign_keys_check(
            "memory_fact", "SELECT %s", [fact.pk], guaranteed={("object_id", "memory_entity")}
        )
        with pytest.raises(ForeignKeyBroken, match="object_id"):
            foreign_keys_check(
                "memory_fact",
                "SELECT %s",
                [fact.pk],
                guaranteed={("subject_id", "memory_entity"), ("object_id", "memory_context")},
            )
        foreign_keys_check("memory_entity", "SELECT %s", [fact.subject_id])
        transaction.set_rollback(True)


def test_two_lines_with_one_id_write_nothing(
    source: Context, make_context: Callable[..., Context]
) -> None:
    target = make_context("twice")
    lines = _lines(source)
    turn = next(x for x in lines if '"record":"turn"' in x)
    end = json.loads(lines[-1])
    end["counts"]["turn"] += 1
    lines = [*lines[:-1], turn, json.dumps({"record": "end", "counts": end["counts"]})]
    from memory.kernel.errors import ValidationFailed

    with pytest.raises(ValidationFailed, match="two turn lines have one id"):
        memory_import(access=system_access(target), lines=lines)
    _nothing_written(target)


def test_a_row_refused_with_triggers_off_writes_nothing_and_turns_them_back_on(
    source: Context, make_context: Callable[..., Context]
) -> None:
    target = make_context("refused")
    lines = [x.replace('"observed_count":1', '"observed_count":null') for x in _lines(source)]
    from memory.kernel.errors import ValidationFailed

    with pytest.raises(ValidationFailed, match="the fact lines could not be written"):
        memory_import(access=system_access(target), lines=lines)
    _nothing_written(target)
    assert not replica_role_on()


def test_a_name_given_as_a_number_is_indexed_as_the_row_holds_it(
    source: Context, make_context: Callable[..., Context]
) -> None:
    """Texts are analyzed from the file's rows while they are written, unless a cell is
    not what the row will hold (a number for a name): then they are read back, and the
    documents are the written rows' all the same."""
    search_index_rebuild(context=source)
    lines = _lines(source)
    at = next(n for n, line in enumerate(lines) if '"record":"entity"' in line)
    entity = json.loads(lines[at])
    entity["name"] = 1234567
    lines[at] = json.dumps(entity) + "\n"
    target = make_context("numbered")
    report = memory_import(access=system_access(target), lines=lines)
    assert not report.texts_analyzed_ahead
    renamed = Entity.objects.get(context=target, name="1234567")
    doc = SearchDoc.objects.get(entity=renamed)
    terms = dict(SearchTerm.objects.filter(context=target).values_list("id", "text"))
    assert "1234567" in {terms[t] for t in doc.term_ids}
    assert len(_documents(target)) == len(_documents(source))
    facts = Fact.objects.filter(context=target, subject=renamed)
    assert facts.exists()
    for fact_doc in SearchDoc.objects.filter(fact__in=facts):
        assert "1234567" in {terms[t] for t in fact_doc.term_ids}


@pytest.fixture
def rows_sent_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every row sent as soon as its line is read, three rows a COPY: a small export
    then goes through many COPYs, some open while later lines are read."""
    from memory.services.transfer import import_lines as module

    monkeypatch.setattr(module, "FLUSH_ROWS", 1)
    monkeypatch.setattr(module, "STREAM_ROWS", 3)


@pytest.mark.usefixtures("rows_sent_one_by_one")
def test_rows_streamed_through_open_copies_round_trip_and_report_progress(
    source: Context, make_context: Callable[..., Context]
) -> None:
    target = make_context("streamed")
    told: list[tuple[int, int]] = []
    lines = _lines(source)
    report = memory_import(
        access=system_access(target),
        lines=_padded(lines),
        on_progress=lambda done, total: told.append((done, total)),
    )
    assert report.set_based_checks and report.texts_analyzed_ahead
    assert_same_memory(source, target)
    # Told between two COPYs, in order, and once at the end.
    assert len(told) >= 2
    assert [done for done, _ in told] == sorted(done for done, _ in told)
    assert told[-1][0] == report.lines


def _padded(lines: list[str]) -> list[str]:
    """The export with blank lines enough for progress to be told more than once (an
    import skips blank lines but counts them as read)."""
    return [lines[0], *(["\n"] * 2_500), *lines[1:]]


@pytest.mark.usefixtures("rows_sent_one_by_one")
@pytest.mark.parametrize(
    ("damage", "message"),
    [
        # A line refused while the facts' COPY is open (the rows before it were sent).
        (lambda lines: _after_facts(lines, '{"record": "spaceship"}'), "spaceship"),
        # A cell the server refuses, in the middle of a stream.
        (lambda lines: [x.replace('"observed_count":1', '"observed_count":"many"')
                        for x in lines], "fact lines"),
    ],
)  # fmt: skip
def test_a_line_refused_while_rows_stream_writes_nothing(
    source: Context,
    make_context: Callable[..., Context],
    damage: Callable[[list[str]], list[str]],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from memory.kernel.errors import ValidationFailed
    from memory.services.transfer import import_lines as module

    monkeypatch.setattr(module, "STREAM_ROWS", 1_000)  # the facts' COPY stays open
    target = make_context("stopped")

    with pytest.raises(ValidationFailed, match=message):
        memory_import(access=system_access(target), lines=damage(_lines(source)))
    _nothing_written(target)
    # The connection is usable again: the open COPY was given up, not left behind.
    assert memory_import(access=system_access(target), lines=_lines(source)).counts
    assert_same_memory(source, target)


def _after_facts(lines: list[str], extra: str) -> list[str]:
    last_fact = max(n for n, line in enumerate(lines) if '"record":"fact"' in line)
    return [*lines[: last_fact + 1], extra, *lines[last_fact + 1 :]]


# Kinds a file may leave out: its documents, with what hangs off them.
DOCUMENT_KINDS = ("document", "chunk", "keyword", "keyword_link")


@pytest.mark.parametrize(
    ("field", "without"),
    [("supersedes_id", ()), ("document_id", DOCUMENT_KINDS)],
    ids=["to a fact", "to a kind the file has no lines of"],
)
def test_a_nullable_reference_the_file_does_not_hold_writes_nothing(
    source: Context, make_context: Callable[..., Context], field: str, without: tuple[str, ...]
) -> None:
    """A reference that may be NULL (a fact's predecessor, its document) and names no
    line is refused, not written as NULL — also when the file has no line of its kind."""
    lines = [line for line in _lines(source) if json.loads(line)["record"] not in without]
    end = json.loads(lines[-1])
    end["counts"] = {k: v for k, v in end["counts"].items() if k not in without}
    lines[-1] = json.dumps(end)
    at = next(n for n, line in enumerate(lines) if '"record":"fact"' in line)
    fact = json.loads(lines[at])
    fact[field] = 987654321
    lines[at] = json.dumps(fact)
    target = make_context("dangling")
    from memory.kernel.errors import ValidationFailed

    with pytest.raises(
        ValidationFailed, match=f"fact {fact['id']}: {field} 987654321 is not in the file"
    ):
        memory_import(access=system_access(target), lines=lines)
    _nothing_written(target)


def test_blocking_keys_made_a_batch_ahead_are_the_originals(
    source: Context, make_context: Callable[..., Context], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One entity a batch: every batch's keys are made in the thread while the batch
    before is copied, and the keys are the original's."""
    from memory.services.transfer import import_index as memory_import_index

    monkeypatch.setattr(memory_import_index, "KEY_BATCH", 1)
    target = make_context("batched")
    memory_import(access=system_access(target), lines=_lines(source))
    assert len(_keys(target)) > 2
    assert _keys(target) == _keys(source)
