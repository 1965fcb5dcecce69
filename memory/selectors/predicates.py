"""Reads of the predicate registry: canonicalization, lookups, lists and the prompt block."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Literal

from django.db import connection
from django.db.models import Prefetch, Q, QuerySet

from memory.domain.predicate_library import CATEGORIES
from memory.domain.predicate_names import (
    fuzzy_typo_match,
    predicate_check_text,
    predicate_normalize,
)
from memory.kernel.errors import NotFound, ValidationFailed
from memory.models import Context, Predicate, PredicateAlias, PredicateMode, PredicateStatus

Via = Literal["exact", "normalized", "alias", "inverse", "fuzzy", "none"]


@dataclass(frozen=True)
class Canonicalization:
    """How ``input`` resolved. ``predicate`` is the registry row the canonical form names,
    whatever its status (an observed or rejected row when ``registered`` is False), or None
    when the form is new."""

    input: str
    canonical: str
    registered: bool
    via: Via
    predicate: Predicate | None
    # Through an inverse alias: ``canonical`` read backwards (``employs`` → ``works_at``).
    inverse: bool = False


@dataclass(frozen=True)
class RegistryIndex:
    """One context's registry in memory, so a batch of lookups costs two queries in all."""

    by_name: dict[str, Predicate]
    alias_to_name: dict[str, str]
    inverse_aliases: frozenset[str] = frozenset()
    # Forms canonicalized against this load: (form, fuzzy) → result. A load a write
    # reuses (registry_index_for_write) answers a form the next write states again
    # without another pass over the registry; the typo match scans every registered form.
    canonicalized: dict[tuple[str, bool], Canonicalization] = field(
        default_factory=dict, compare=False, repr=False
    )

    def registered_forms(self) -> dict[str, Predicate]:
        """Every registered name and alias, mapped to its registered predicate."""
        forms = {n: p for n, p in self.by_name.items() if p.status == PredicateStatus.REGISTERED}
        for alias, name in self.alias_to_name.items():
            if name in forms:
                forms[alias] = forms[name]
        return forms


def registry_index_load(*, context: Context) -> RegistryIndex:
    """Load the registry of ``context`` (queries: predicates; aliases)."""
    by_name = {p.name: p for p in Predicate.objects.filter(context=context)}
    by_id = {p.pk: p.name for p in by_name.values()}
    aliases = list(
        PredicateAlias.objects.filter(context=context).values_list(
            "alias", "predicate_id", "inverse"
        )
    )
    return RegistryIndex(
        by_name=by_name,
        alias_to_name={alias: by_id[pid] for alias, pid, _ in aliases if pid in by_id},
        inverse_aliases=frozenset(alias for alias, pid, inverse in aliases if inverse),
    )


# The registry's content as one digest: every column of every predicate and alias row of
# the context, except the stamps that drift records on each write (first/last seen) and
# ``updated_at`` (which only moves with a column the digest already covers). The columns
# come from the models, so a field a migration adds is covered with no change here.
_DIGEST_SKIPS = frozenset({"first_seen_at", "last_seen_at", "updated_at"})


def _row_text(model: type[Predicate] | type[PredicateAlias], alias: str) -> str:
    columns = [f.column for f in model._meta.concrete_fields if f.column not in _DIGEST_SKIPS]
    return "ROW(" + ", ".join(f"{alias}.{column}" for column in columns) + ")::text"


_DIGEST_SQL = f"""
SELECT md5(
  coalesce((SELECT string_agg({_row_text(Predicate, "p")}, E'\\n' ORDER BY p.id)
            FROM {Predicate._meta.db_table} p WHERE p.context_id = %(context)s), '')
  || E'\\n--\\n' ||
  coalesce((SELECT string_agg({_row_text(PredicateAlias, "a")}, E'\\n' ORDER BY a.id)
            FROM {PredicateAlias._meta.db_table} a WHERE a.context_id = %(context)s), ''))
"""  # noqa: S608 (column and table names from the models)

# Per context: the digest of its registry and the load made from it (see below).
_loads_for_write: dict[int, tuple[str, RegistryIndex]] = {}


def registry_index_for_write(*, context: Context) -> RegistryIndex:
    """The registry of ``context`` for a write to resolve its predicates with: the last
    load this process made of it when the registry's digest is unchanged, else a new load.

    A small write spent more on building ~100 predicate instances than on anything else
    it reads; the digest is one statement computed by the server. Equal digests mean the
    same rows, column for column, so a reused load is the load a fresh one would give,
    except for the seen stamps, which no write reads. The load is shared: callers read
    it and its predicates, never change them (a predicate to change is read afresh;
    docs/decisions/0106).
    """
    digest = _registry_digest(context)
    cached = _loads_for_write.get(context.pk)
    if cached is not None and cached[0] == digest:
        return cached[1]
    index = registry_index_load(context=context)
    # Kept only if nothing changed the registry while it loaded (its two reads are two
    # snapshots): a load is never filed under a digest its rows do not have.
    if _registry_digest(context) == digest:
        _loads_for_write[context.pk] = (digest, index)
    return index


def _registry_digest(context: Context) -> str:
    with connection.cursor() as cursor:
        cursor.execute(_DIGEST_SQL, {"context": context.pk})
        row = cursor.fetchone()
    return str(row[0])


def predicate_canonicalize(
    *, context: Context, name: str, index: RegistryIndex | None = None
) -> Canonicalization:
    """Resolve ``name`` the way writes and reads do.

    Raises ValidationFailed(code="invalid_predicate") for hostile text. Order: a registered
    name typed exactly ("exact") or after normalization ("normalized"), then an alias
    ("alias"), then in permissive mode a typo of a registered name or alias ("fuzzy"; never
    for a form the registry already holds as observed or rejected, which stays as it is),
    else "none" with the normalized form. Pass ``index`` to reuse one registry load across
    many lookups.
    """
    predicate_check_text(name)
    fuzzy = context.predicate_mode == PredicateMode.PERMISSIVE
    if index is None:
        return _canonicalize(registry_index_load(context=context), name, fuzzy=fuzzy)
    memo = index.canonicalized
    known = memo.get((name, fuzzy))
    if known is None:
        if len(memo) >= _CANONICALIZED_KEPT:
            memo.clear()  # forms a strict registry refuses add no rows, so no new load
        known = memo[name, fuzzy] = _canonicalize(index, name, fuzzy=fuzzy)
    return known


_CANONICALIZED_KEPT = 10_000


def _canonicalize(index: RegistryIndex, raw: str, *, fuzzy: bool) -> Canonicalization:
    """``raw`` has passed predicate_check_text."""
    form = predicate_normalize(raw)
    found = index.by_name.get(form)
    if found is not None and found.status == PredicateStatus.REGISTERED:
        via: Via = "exact" if raw == form else "normalized"
        return Canonicalization(raw, form, True, via, found)
    if form in index.alias_to_name:
        target = index.by_name[index.alias_to_name[form]]
        registered = target.status == PredicateStatus.REGISTERED
        if form in index.inverse_aliases:
            return Canonicalization(raw, target.name, registered, "inverse", target, True)
        return Canonicalization(raw, target.name, registered, "alias", target)
    if found is None and fuzzy:
        forms = index.registered_forms()
        match = fuzzy_typo_match(form, forms)
        if match is not None:
            backwards = match in index.inverse_aliases
            return Canonicalization(raw, forms[match].name, True, "fuzzy", forms[match], backwards)
    return Canonicalization(raw, form, False, "none", found)


def predicate_get(*, context: Context, name: str) -> Predicate:
    """The registry row ``name`` names in any form (any status; no fuzzy guessing).

    Raises NotFound, or ValidationFailed for hostile text.
    """
    predicate_check_text(name)
    result = _canonicalize(registry_index_load(context=context), name, fuzzy=False)
    if result.predicate is None:
        raise NotFound(f"no predicate {result.canonical!r} in this context", code="not_found")
    return result.predicate


def predicate_has(*, context: Context, name: str) -> bool:
    """Whether ``name``, in any form or as an alias, is a *registered* predicate.

    Text that could never be a predicate (``a]->(b)``) simply is not one: False.
    """
    try:
        predicate_check_text(name)
    except ValidationFailed:
        return False
    result = _canonicalize(registry_index_load(context=context), name, fuzzy=False)
    return result.registered


def predicate_alias_owner(*, context: Context, form: str) -> Predicate | None:
    """The predicate whose alias ``form`` (already normalized) is, if any."""
    alias = (
        PredicateAlias.objects.filter(context=context, alias=form).select_related("predicate")
    ).first()
    return alias.predicate if alias is not None else None


def predicate_list(
    *, context: Context, status: str | None = None, category: str | None = None
) -> QuerySet[Predicate]:
    """The registry, ordered by category then name, aliases prefetched as ``alias_set``."""
    queryset = Predicate.objects.filter(context=context).prefetch_related(
        Prefetch(
            "alias_set",
            queryset=PredicateAlias.objects.only("id", "predicate_id", "alias", "inverse"),
        )
    )
    if status is not None:
        queryset = queryset.filter(status=status)
    if category is not None:
        queryset = queryset.filter(category=category)
    return queryset.order_by("category", "name")


def registry_render_for_prompt(
    *,
    context: Context,
    categories: list[str] | None = None,
    subject_type: str | None = None,
    max_per_category: int = 12,
) -> str:
    """The registry block of the extraction prompt (two queries).

    One block per category (the standard order, then others alphabetically, or the order of
    ``categories``), each line ``name (kind): description [aliases: a, b]``, the most
    important first (then by name), at most ``max_per_category`` lines. Only registered
    predicates not excluded from the prompt; with ``subject_type``, only those without a
    subject hint or whose hint includes it.
    """
    queryset = predicate_list(context=context, status=PredicateStatus.REGISTERED).filter(
        exclude_from_prompt=False
    )
    if categories is not None:
        queryset = queryset.filter(category__in=categories)
    if subject_type is not None:
        queryset = queryset.filter(Q(subject_types=[]) | Q(subject_types__contains=[subject_type]))
    grouped: dict[str, list[Predicate]] = defaultdict(list)
    for predicate in queryset:
        grouped[predicate.category].append(predicate)
    blocks = []
    for category in _category_order(grouped, categories):
        ranked = sorted(grouped[category], key=lambda p: (-p.default_importance, p.name))
        lines = [_prompt_line(p) for p in ranked[: max(max_per_category, 0)]]
        if lines:
            blocks.append("\n".join([f"{category}:", *lines]))
    return "\n\n".join(blocks)


def _category_order(present: dict[str, list[Predicate]], requested: list[str] | None) -> list[str]:
    if requested is not None:
        return [c for c in dict.fromkeys(requested) if c in present]
    standard = [c for c in CATEGORIES if c in present]
    return standard + sorted(set(present) - set(CATEGORIES))


def _prompt_line(predicate: Predicate) -> str:
    line = f"{predicate.name} ({predicate.kind})"
    if predicate.description:
        line += f": {' '.join(predicate.description.split())}"
    # Inverse aliases are not offered: the prompt teaches the direction that is stored.
    aliases = sorted(a.alias for a in predicate.alias_set.all() if not a.inverse)
    if aliases:
        line += f" [aliases: {', '.join(aliases)}]"
    return line
