from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from memory.domain.access import ContextAccess, system_access
from memory.kernel.errors import PermissionDenied, ValidationFailed
from memory.kernel.scopes import Grants
from memory.models import AuditEvent, Context, Entity, EntityIdentifier, Role
from memory.services.transfer import seeding as entity_import
from memory.services.transfer.seeding import ImportRow, entities_import

pytestmark = pytest.mark.django_db

CSV = (
    "name,type,scope,aliases,identifiers,attributes,email\n"
    'Acme Corp,company,org/acme,Acme;ACME,domain:acme.example,"{""tier"": ""gold""}",\n'
    "Alex Rivera,person,org/acme,,,,alex@acme.example\n"
)


def _jsonl(*rows: dict[str, Any]) -> str:
    return "\n".join(json.dumps(row) for row in rows) + "\n"


def _imported(row: ImportRow) -> Entity:
    assert row.entity_id is not None, row
    return Entity.objects.get(pk=row.entity_id)


def test_csv_rows_are_created_with_aliases_identifiers_and_attributes(
    access: ContextAccess,
) -> None:
    report = entities_import(access=access, content=CSV.encode())

    assert (report.format, report.total, report.created, report.failed) == ("csv", 2, 2, 0)
    acme = _imported(report.rows[0])
    assert (acme.name, acme.type, acme.scope, acme.seeded) == (
        "Acme Corp",
        "organisation",
        "org/acme",
        True,
    )
    assert acme.aliases == ["Acme", "ACME"]
    assert acme.attributes == {"tier": "gold"}
    assert [(i.kind, i.value) for i in acme.identifiers.all()] == [("domain", "acme.example")]
    alex = _imported(report.rows[1])
    assert [(i.kind, i.value) for i in alex.identifiers.all()] == [("email", "alex@acme.example")]


def test_jsonl_rows_are_created_and_format_is_sniffed(access: ContextAccess) -> None:
    content = _jsonl(
        {
            "name": "Maria Chen",
            "type": "person",
            "scope": "org/acme",
            "aliases": ["M. Chen"],
            "identifiers": [{"kind": "email", "value": "Maria@Acme.example"}],
            "attributes": {"team": "platform"},
        },
        {"name": "Berlin", "type": "city", "scope": "org/acme"},
    )

    report = entities_import(access=access, content=content)

    assert (report.format, report.created) == ("jsonl", 2)
    maria = _imported(report.rows[0])
    assert maria.aliases == ["M. Chen"]
    assert maria.attributes == {"team": "platform"}
    assert maria.identifiers.get().value == "maria@acme.example"
    assert _imported(report.rows[1]).type == "location"


def test_reimport_matches_instead_of_duplicating(access: ContextAccess) -> None:
    entities_import(access=access, content=CSV)

    report = entities_import(access=access, content=CSV)

    assert (report.created, report.matched, report.failed) == (0, 2, 0)
    assert Entity.objects.filter(context=access.context).count() == 2
    assert report.rows[0].message == "matched by identifier"


def test_bad_row_is_reported_and_other_rows_still_land(access: ContextAccess) -> None:
    content = _jsonl(
        {"name": "Good One", "scope": "org/acme"},
        {"name": "", "scope": "org/acme"},
        {"name": "Bad Attributes", "scope": "org/acme", "attributes": [1, 2]},
        {"name": "Bad Scope", "scope": "../etc"},
        {
            "name": "Bad Identifier",
            "scope": "org/acme",
            "identifiers": [{"kind": "E-Mail!", "value": "x"}],
        },
        {"name": "Good Two", "scope": "org/acme"},
    )

    report = entities_import(access=access, content=content)

    assert (report.total, report.created, report.failed) == (6, 2, 4)
    assert [r.status for r in report.rows] == [
        "created",
        "error",
        "error",
        "error",
        "error",
        "created",
    ]
    messages = [r.message for r in report.errors]
    assert "no name" in messages[0]
    assert "attributes must be a JSON object" in messages[1]
    assert "invalid scope" in messages[2]
    assert "identifier kind" in messages[3]
    names = set(Entity.objects.filter(context=access.context).values_list("name", flat=True))
    assert names == {"Good One", "Good Two"}
    assert not EntityIdentifier.objects.filter(context=access.context).exists()


def test_invalid_json_line_is_a_row_error_with_its_line_number(access: ContextAccess) -> None:
    content = '{"name": "A", "scope": "org/acme"}\n\n{not json}\n[1]\n'

    report = entities_import(access=access, content=content)

    assert [(r.row, r.line, r.status) for r in report.rows] == [
        (1, 1, "created"),
        (2, 3, "error"),
        (3, 4, "error"),
    ]
    assert "not valid JSON" in report.rows[1].message
    assert "must be a JSON object" in report.rows[2].message


def test_csv_cell_errors_are_row_errors(access: ContextAccess) -> None:
    content = (
        "name,scope,identifiers,attributes\n"
        "A,org/acme,nocolon,\n"
        "B,org/acme,,{broken\n"
        "C,org/acme,,,extra cell\n"
        "D,org/acme,,\n"
    )

    report = entities_import(access=access, content=content)

    assert [r.status for r in report.rows] == ["error", "error", "error", "created"]
    assert "kind:value" in report.rows[0].message
    assert "not valid JSON" in report.rows[1].message
    assert "5 cells" in report.rows[2].message
    assert [r.line for r in report.rows] == [2, 3, 4, 5]


def test_scope_default_fills_rows_without_scope(access: ContextAccess) -> None:
    content = "name,scope\nNo Scope,\nOwn Scope,org/globex\n"

    report = entities_import(access=access, content=content, scope_default="org/acme")

    scopes = [_imported(r).scope for r in report.rows]
    assert scopes == ["org/acme", "org/globex"]


def test_row_without_scope_and_no_default_fails(access: ContextAccess) -> None:
    report = entities_import(access=access, content="name\nLonely\n")

    assert report.failed == 1
    assert "no scope" in report.rows[0].message


def test_extra_csv_columns_become_attributes_with_a_note(access: ContextAccess) -> None:
    report = entities_import(access=access, content="name,scope,title\nAlex,org/acme,CTO\n")

    assert _imported(report.rows[0]).attributes == {"title": "CTO"}
    assert report.notes == ["fields kept as attributes: title"]


def test_tab_separated_csv_with_a_bom(access: ContextAccess) -> None:
    content = "\ufeffname\tscope\taliases\nAcme\torg/acme\tA1;A2\n".encode()

    report = entities_import(access=access, content=content, format="csv")

    assert _imported(report.rows[0]).aliases == ["A1", "A2"]


def test_rows_outside_write_grants_fail_per_row(make_context: Callable[..., Context]) -> None:
    context = make_context()
    limited = ContextAccess(
        context=context,
        user=None,
        role=Role.ADMIN,
        grants=Grants.from_strings(["read:*", "write:org/acme/*"]),
    )
    content = "name,scope\nInside,org/acme/team\nOutside,org/globex\n"

    report = entities_import(access=limited, content=content)

    assert [r.status for r in report.rows] == ["created", "error"]
    assert "no write grant on scope 'org/globex'" in report.rows[1].message
    assert not Entity.objects.filter(context=context, scope="org/globex").exists()


def test_seeding_needs_the_admin_role(context: Context) -> None:
    curator = ContextAccess(
        context=context, user=None, role=Role.CURATOR, grants=Grants.everything()
    )

    with pytest.raises(PermissionDenied):
        entities_import(access=curator, content="name,scope\nA,org/acme\n")
    report = entities_import(access=curator, content="name,scope\nA,org/acme\n", seeded=False)

    assert report.created == 1
    assert _imported(report.rows[0]).seeded is False


def test_seeding_is_audited_once_per_batch_with_every_row(
    access: ContextAccess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(entity_import, "BATCH_ROWS", 2)
    entities_import(access=access, content="name,scope\nAcme,org/acme\n")
    content = "name,scope\nAcme,org/acme\nGlobex,org/acme\n,org/acme\nInitech,org/acme\n"

    report = entities_import(access=access, content=content)

    events = list(
        AuditEvent.objects.filter(context=access.context, action="entities_seed").order_by("pk")
    )
    assert [e.summary for e in events[1:]] == [
        "seeded 2 entities (rows 1–2): 1 created, 0 marked canonical",
        "seeded 1 entities (rows 3–4): 1 created, 0 marked canonical",
    ]
    assert events[1].after is not None
    assert events[1].after["rows"] == [
        {"row": 1, "entity_id": report.rows[0].entity_id, "status": "matched",
         "marked_canonical": False},
        {"row": 2, "entity_id": report.rows[1].entity_id, "status": "created",
         "marked_canonical": True},
    ]  # fmt: skip
    assert Entity.objects.filter(context=access.context, seeded=True).count() == 3


def test_matching_an_unseeded_entity_marks_it_canonical(access: ContextAccess) -> None:
    entities_import(access=access, content="name,scope\nAcme,org/acme\n", seeded=False)

    report = entities_import(access=access, content="name,scope\nAcme,org/acme\n")

    assert _imported(report.rows[0]).seeded is True
    event = AuditEvent.objects.get(context=access.context, action="entities_seed")
    assert event.summary == "seeded 1 entities (rows 1–1): 0 created, 1 marked canonical"


def test_progress_is_reported_after_every_batch(
    access: ContextAccess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(entity_import, "BATCH_ROWS", 2)
    seen: list[tuple[int, int]] = []
    content = CSV + "Globex,organisation,org/acme,,,,\n"

    entities_import(access=access, content=content, on_progress=lambda d, t: seen.append((d, t)))

    assert seen == [(2, 3), (3, 3)]


def test_a_failing_row_rolls_back_alone_inside_its_batch(access: ContextAccess) -> None:
    content = "name,scope\nAcme,org/acme\nBad,org/acme/../x\nGlobex,org/acme\n"

    report = entities_import(access=access, content=content)

    assert [r.status for r in report.rows] == ["created", "error", "created"]
    assert set(Entity.objects.filter(context=access.context).values_list("name", flat=True)) == {
        "Acme",
        "Globex",
    }


def test_import_embeds_each_batch_now_or_leaves_the_rest_to_one_drain(
    access: ContextAccess,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.TASKS = {"default": {"BACKEND": "django_tasks.backends.dummy.DummyBackend"}}
    monkeypatch.setattr(entity_import, "BATCH_ROWS", 2)
    from django_tasks import default_task_backend

    content = "name,scope\nAcme,org/acme\nGlobex,org/acme\nInitech,org/acme\n"
    with django_capture_on_commit_callbacks(execute=True):
        entities_import(access=access, content=content, embed_now=True)

    assert not Entity.objects.filter(context=access.context, embedding__isnull=True).exists()
    assert default_task_backend.results == []  # type: ignore[attr-defined]

    with django_capture_on_commit_callbacks(execute=True):
        entities_import(access=access, content=content.replace("Acme", "Umbrella"))

    # One drain for the worker, and only Umbrella (new) waits for a vector.
    queued = [r.task.name for r in default_task_backend.results]  # type: ignore[attr-defined]
    assert queued == ["embeddings_drain_task"]
    waiting = Entity.objects.filter(context=access.context, embedding__isnull=True)
    assert list(waiting.values_list("name", flat=True)) == ["Umbrella"]


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (b"\xff\xfe\x00n\x00a", "undecodable"),
        (b"name,scope\nA\x00,org/acme\n", "undecodable"),
        (b"", "empty_file"),
        (b"   \n", "empty_file"),
        (b"title,scope\nA,org/acme\n", "invalid_format"),
        (b'[{"name": "A"}]', "invalid_format"),
        (b'name,scope\n"A"x,org/acme\n', "invalid_format"),
    ],
)
def test_unreadable_files_are_refused_whole(
    access: ContextAccess, content: bytes, code: str
) -> None:
    with pytest.raises(ValidationFailed) as refused:
        entities_import(access=access, content=content)

    assert refused.value.code == code
    assert not Entity.objects.filter(context=access.context).exists()


def test_jsonl_without_any_object_is_refused(access: ContextAccess) -> None:
    with pytest.raises(ValidationFailed) as refused:
        entities_import(access=access, content="1\n2\n", format="jsonl")

    assert refused.value.code == "invalid_format"


def test_unknown_format_is_refused(access: ContextAccess) -> None:
    with pytest.raises(ValidationFailed) as refused:
        entities_import(access=access, content=CSV, format="xml")  # type: ignore[arg-type]

    assert refused.value.code == "invalid_format"


def test_more_than_50000_rows_is_refused_before_any_write(access: ContextAccess) -> None:
    content = "name,scope\n" + "A,org/acme\n" * 50_001

    with pytest.raises(ValidationFailed) as refused:
        entities_import(access=access, content=content)

    assert refused.value.code == "too_many_rows"
    assert not Entity.objects.filter(context=access.context).exists()


def test_file_over_20_mb_is_refused(access: ContextAccess) -> None:
    content = b"name,scope\n" + b"x" * (20 * 1024 * 1024)

    with pytest.raises(ValidationFailed) as refused:
        entities_import(access=access, content=content)

    assert refused.value.code == "file_too_large"


def test_system_access_imports_into_any_scope(context: Context) -> None:
    report = entities_import(access=system_access(context), content="name,scope\nDeep,a/b/c/d\n")

    assert report.created == 1
