"""The registry file: reading a registry export back (its shape checked with Pydantic)
and importing it through the registry services, all or nothing. The dashboard's registry
page and the API's ``POST predicates/import`` both call it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from django.db import transaction
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memory.domain.access import ContextAccess
from memory.domain.constraints import constraints_clean
from memory.domain.predicate_names import predicate_check_text, predicate_normalize
from memory.kernel.errors import DomainError, ValidationFailed
from memory.models import Predicate, PredicateStatus, Role
from memory.selectors.registry import REGISTRY_FORMAT, REGISTRY_VERSION
from memory.services.registry.predicates import (
    predicate_alias_add,
    predicate_register,
    predicate_update,
)

MAX_REGISTRY_PREDICATES = 2000


class PredicateEntry(BaseModel):
    """One predicate of a registry file: the name, any editable field, and aliases."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(min_length=1, max_length=100)
    description: str | None = None
    example: str | None = None
    category: str | None = None
    kind: str | None = None
    subject_types: list[str] | None = None
    object_types: list[str] | None = None
    inverse: str | None = None
    default_importance: float | None = None
    ranking_weight: float | None = None
    single_valued: bool | None = None
    is_aggregate: bool | None = None
    lifecycle: str | None = None
    default_validity_days: int | None = None
    exclude_from_prompt: bool | None = None
    # Checked by the registry's own validation (memory/domain/constraints.py).
    constraints: list[dict[str, Any]] | None = None
    aliases: list[str] = Field(default_factory=list, max_length=100)

    def fields(self) -> dict[str, Any]:
        """The editable fields the file sets (a null validity is a value; others are not)."""
        given = self.model_dump(exclude={"name", "aliases"}, exclude_unset=True)
        return {k: v for k, v in given.items() if v is not None or k == "default_validity_days"}


class RegistryFile(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    format: str = REGISTRY_FORMAT
    version: int = REGISTRY_VERSION
    predicates: list[PredicateEntry] = Field(max_length=MAX_REGISTRY_PREDICATES)

    @field_validator("format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        if value != REGISTRY_FORMAT:
            raise ValueError(f"expected {REGISTRY_FORMAT!r}")
        return value

    @field_validator("version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value != REGISTRY_VERSION:
            raise ValueError(f"this desk reads version {REGISTRY_VERSION}")
        return value


def registry_file_parse(data: Any) -> list[PredicateEntry]:
    """Check a decoded registry file's shape (an export, or a bare list of predicates);
    ValidationFailed lists every problem found, naming where it is."""
    if isinstance(data, list):
        data = {"predicates": data}
    if not isinstance(data, dict):
        raise ValidationFailed('expected a JSON object with a "predicates" list')
    try:
        parsed = RegistryFile.model_validate(data)
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in error['loc']) or 'file'}: {error['msg']}"
            for error in exc.errors()[:10]
        ]
        raise ValidationFailed(
            "the file is not a registry export: " + "; ".join(problems),
            code="invalid_registry_file",
            details=problems,
        ) from None
    seen: dict[str, str] = {}
    for entry in parsed.predicates:
        try:
            predicate_check_text(entry.name)
        except ValidationFailed as exc:
            raise ValidationFailed(f"predicate {entry.name[:60]!r}: {exc.message}") from None
        form = predicate_normalize(entry.name)
        if form in seen:
            raise ValidationFailed(
                f"{entry.name!r} and {seen[form]!r} are the same predicate ({form}); "
                "list each predicate once",
                code="invalid_registry_file",
            )
        seen[form] = entry.name
    return parsed.predicates


ImportOutcomeKind = Literal["created", "promoted", "updated", "unchanged", "error"]


@dataclass(frozen=True)
class RegistryImportOutcome:
    name: str
    outcome: ImportOutcomeKind
    detail: str = ""


@dataclass(frozen=True)
class RegistryImportResult:
    outcomes: list[RegistryImportOutcome]

    @property
    def applied(self) -> bool:
        return not any(o.outcome == "error" for o in self.outcomes)


@transaction.atomic
def registry_import(
    *, access: ContextAccess, entries: list[PredicateEntry]
) -> RegistryImportResult:
    """Register new predicates and update existing ones through the registry services, all
    or nothing: every entry is tried (each in a savepoint, so all errors are reported at
    once) and any error rolls the whole import back. Aliases are added, never removed."""
    access.require_role(Role.ADMIN)
    outcomes: list[RegistryImportOutcome] = []
    for entry in entries:
        try:
            with transaction.atomic():
                outcomes.append(_import_predicate(access, entry))
        except DomainError as exc:
            outcomes.append(RegistryImportOutcome(entry.name, "error", exc.message))
    # Constraints go in once every predicate of the file exists: they may name each other.
    for index, entry in enumerate(entries):
        if entry.constraints is None or outcomes[index].outcome == "error":
            continue
        try:
            with transaction.atomic():
                if _import_constraints(access, entry) and outcomes[index].outcome == "unchanged":
                    outcomes[index] = RegistryImportOutcome(outcomes[index].name, "updated")
        except DomainError as exc:
            outcomes[index] = RegistryImportOutcome(entry.name, "error", exc.message)
    result = RegistryImportResult(outcomes)
    if not result.applied:
        transaction.set_rollback(True)
    return result


def _import_predicate(access: ContextAccess, entry: PredicateEntry) -> RegistryImportOutcome:
    form = predicate_normalize(entry.name)
    existing = Predicate.objects.filter(context=access.context, name=form).first()
    fields = entry.fields()
    fields.pop("constraints", None)  # _import_constraints, once every predicate exists
    if existing is None or existing.status != PredicateStatus.REGISTERED:
        predicate_register(access=access, name=form, aliases=entry.aliases, **fields)
        outcome: ImportOutcomeKind = "created" if existing is None else "promoted"
        return RegistryImportOutcome(form, outcome)
    changed = {f: v for f, v in fields.items() if getattr(existing, f) != v}
    if changed:
        predicate_update(access=access, predicate=existing, **changed)
    present = set(existing.alias_set.values_list("alias", flat=True))
    added = []
    for alias in entry.aliases:
        if predicate_normalize(alias) not in present | {form}:
            added.append(predicate_alias_add(access=access, predicate=existing, alias=alias).alias)
    if not changed and not added:
        return RegistryImportOutcome(form, "unchanged")
    detail = ", ".join([*sorted(changed), *(f"alias {a}" for a in added)])
    return RegistryImportOutcome(form, "updated", detail)


def _import_constraints(access: ContextAccess, entry: PredicateEntry) -> bool:
    """Set the entry's constraints; whether they changed."""
    predicate = Predicate.objects.get(context=access.context, name=predicate_normalize(entry.name))
    if constraints_clean(entry.constraints) == predicate.constraints:
        return False
    predicate_update(access=access, predicate=predicate, constraints=entry.constraints)
    return True
