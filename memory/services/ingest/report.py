"""What an ingest run reports: its result, one JSON log line, and its stage timings."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field, fields
from typing import Any

from memory.models import Context, Entity, Predicate, PredicateStatus, Run
from memory.selectors.constraints import violation_as_dict
from memory.services.facts.batch import FactBatchResult
from memory.services.ingest.triples import SECRET_ITEM, refusal_warning

logger = logging.getLogger("memory.ingest")


@dataclass
class IngestResult:
    entities_created: list[dict[str, Any]] = field(default_factory=list)
    entities_matched: list[dict[str, Any]] = field(default_factory=list)
    facts_created: list[dict[str, Any]] = field(default_factory=list)
    facts_reobserved: list[dict[str, Any]] = field(default_factory=list)
    facts_superseded: list[dict[str, Any]] = field(default_factory=list)
    new_predicates: list[dict[str, Any]] = field(default_factory=list)
    unresolved: list[dict[str, Any]] = field(default_factory=list)
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    merges: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # What the run added to entities beyond creating them — spellings on entities it
    # matched, identifiers — each ``{entity, aliases, alias_keys, identifiers}``: what
    # retracting the run takes back (services/ingest/retract.py).
    entity_changes: list[dict[str, Any]] = field(default_factory=list)
    # The searchable turn the memory's text was kept as ({id, thread, ref}); facts_created
    # point back to it.
    turn: dict[str, Any] | None = None
    preview: bool = False

    def refuse(self, entry: dict[str, Any]) -> None:
        """An item not written (``{section, position, item, reason, code}``): unresolved,
        and a warning the summary counts."""
        self.unresolved.append(entry)
        self.warnings.append(refusal_warning(entry["section"], entry["position"], entry["reason"]))

    def as_dict(self) -> dict[str, Any]:
        # Shallow: the lists already hold plain JSON values (asdict's deep copy of a bulk
        # run's thousands of entries is measurable).
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def summary(self) -> dict[str, Any]:
        return {
            "entities_created": len(self.entities_created),
            "entities_matched": len(self.entities_matched),
            "facts_created": len(self.facts_created),
            "facts_reobserved": len(self.facts_reobserved),
            "facts_superseded": len(self.facts_superseded),
            "facts_pending": sum(
                1 for f in self.facts_created + self.facts_reobserved if f["trust"] == "pending"
            ),
            "new_predicates": [p["name"] for p in self.new_predicates],
            "predicates_used": sorted(
                {f["predicate"] for f in self.facts_created + self.facts_reobserved}
            ),
            "unresolved": len(self.unresolved),
            "conflicts": len(self.conflicts),
            "merges": len(self.merges),
            "warnings": len(self.warnings),
            "preview": self.preview,
        }


def ingest_log(run: Run) -> None:
    """One JSON line per run."""
    summary = run.summary or {}
    logger.info(
        json.dumps(
            {
                "operation": "ingest",
                "run_id": run.pk,
                "context": run.context.slug,
                "scope": run.scope,
                "mode": run.mode,
                "outcome": run.outcome,
                "entities_created": summary.get("entities_created", 0),
                "entities_matched": summary.get("entities_matched", 0),
                "facts_created": summary.get("facts_created", 0),
                "predicates_used": summary.get("predicates_used", []),
                "new_predicates": summary.get("new_predicates", []),
                "merges": summary.get("merges", 0),
                "rejected": summary.get("unresolved", 0),
                "prompt_tokens": run.prompt_tokens,
                "completion_tokens": run.completion_tokens,
                "duration_ms": (run.timings or {}).get("total_ms"),
                "error": run.error or None,
            },
            ensure_ascii=False,
        )
    )


class IngestReport:
    """Renders entities and facts for the result; in a preview, rows that the rollback
    removes are shown without an id."""

    def __init__(self, *, preview: bool, created: set[int]) -> None:
        self.preview = preview
        self.created_entities = created
        self.entity_names: dict[int, str] = {}
        # Each written fact's item, its draft and what the result shows of it, in order:
        # ``fact_warnings`` adds the constraint warnings to them once they are known.
        self._shown: list[tuple[Any, Any, dict[str, Any]]] = []

    def entity(self, entity: Entity) -> dict[str, Any]:
        self.entity_names[entity.pk] = entity.name
        new = self.preview and entity.pk in self.created_entities
        return {
            "id": None if new else entity.pk,
            "name": entity.name,
            "type": entity.type,
            "scope": entity.scope,
        }

    def merges(self, r: Any) -> list[dict[str, Any]]:
        item = r.plan
        if not r.created and r.matched_by in ("embedding", "llm_judge"):
            return [
                {
                    "action": "attached",
                    "mention": item.mention.name,
                    "entity": self.entity(r.entity),
                    "method": r.matched_by,
                    "score": round(float(item.score or 0.0), 4),
                    "reason": item.judge_reason,
                }
            ]
        if r.candidate is not None:
            return [
                {
                    "action": "duplicate_candidate",
                    "mention": item.mention.name,
                    "entity": self.entity(r.entity),
                    "candidate": {"id": item.candidate_id},
                    "score": r.candidate.score,
                    "methods": r.candidate.methods,
                    "reason": item.judge_reason,
                }
            ]
        return []

    def entity_changes(self, r: Any) -> list[dict[str, Any]]:
        if self.preview or not (r.aliases_added or r.alias_keys_added or r.identifiers_added):
            return []
        return [
            {
                "entity": r.entity.pk,
                "aliases": list(r.aliases_added),
                "alias_keys": list(r.alias_keys_added),
                "identifiers": [list(pair) for pair in r.identifiers_added],
            }
        ]

    def fact(self, fact: Any, *, outcome: str, predicate: str) -> dict[str, Any]:
        new = self.preview and outcome not in ("reobserved", "updated")
        out: dict[str, Any] = {
            "id": None if new else fact.pk,
            "subject": self._ref(fact.subject_id),
            "predicate": predicate,
            "raw_predicate": fact.raw_predicate,
            "kind": fact.kind,
            "outcome": outcome,
            "status": fact.status,
            "trust": fact.trust,
        }
        if fact.trust_reason:
            out["trust_reason"] = fact.trust_reason
        if fact.object_id is not None:
            out["object"] = self._ref(fact.object_id)
        else:
            out["value"] = fact.value
        return out

    def _ref(self, entity_id: int) -> dict[str, Any]:
        new = self.preview and entity_id in self.created_entities
        return {"id": None if new else entity_id, "name": self.entity_names.get(entity_id, "")}

    def facts(self, result: IngestResult, batch: FactBatchResult, drafts: list[Any]) -> None:
        observed: dict[str, dict[str, Any]] = {}
        for item, draft in zip(batch.items, drafts, strict=True):
            if item.error is not None or item.fact is None or item.outcome is None:
                refused = item.error is not None and item.error.code == "unknown_predicate"
                error = item.error
                secret = error is not None and error.code == "secret_refused"
                result.refuse(
                    {
                        "section": draft.section,
                        "position": draft.position,
                        "item": SECRET_ITEM if secret else draft.item,
                        "reason": error.message if error else "not written",
                        "code": error.code if error else "not_written",
                    }
                )
                if refused and error is not None:
                    canonical = str((error.details or {}).get("canonical", ""))
                    self._new_predicate(
                        observed, canonical, draft.predicate, _example(draft), "refused"
                    )
                continue
            fact = item.fact
            name = item.resolved.predicate.name if item.resolved is not None else ""
            shown = self.fact(fact, outcome=item.outcome, predicate=name)
            if item.rejected_before:
                shown["rejected_before"] = True
            self._shown.append((item, draft, shown))
            if item.proposes_to_replace is not None:
                shown["proposes_to_replace"] = item.proposes_to_replace.pk
            if item.outcome in ("reobserved", "updated"):
                result.facts_reobserved.append(shown)
            else:
                result.facts_created.append(shown)
            if item.superseded is not None:
                result.facts_superseded.append(
                    {
                        "id": item.superseded.pk,
                        "predicate": name,
                        "superseded_by": shown["id"],
                    }
                )
            if item.conflict is not None:
                result.conflicts.append(
                    {
                        "id": None if self.preview else item.conflict.pk,
                        "subject": shown["subject"],
                        "predicate": name,
                        "current_fact": item.conflict.current_fact_id,
                        "contested_fact": shown["id"],
                        "reason": item.conflict.reason,
                    }
                )
            if item.resolved is not None and not item.resolved.registered:
                self._new_predicate(
                    observed, item.resolved.canonical, draft.predicate, _example(draft), "observed"
                )
        result.new_predicates = list(observed.values())

    def fact_warnings(self, result: IngestResult) -> None:
        """The constraints each written fact breaks (``fact_batch_warn``): the fact is
        kept and its entry says so, as ``POST facts`` does, and the run's warnings list
        them. A violation several facts share is rendered once."""
        rendered: dict[int, dict[str, Any]] = {}
        for item, draft, shown in self._shown:
            if not item.warnings:
                continue
            shown["warnings"] = [
                rendered.setdefault(id(v), violation_as_dict(v)) for v in item.warnings
            ]
            result.warnings += [
                f"{draft.section}[{draft.position}]: {v.message} ({v.status} "
                f"{v.constraint} constraint of {v.predicate})"
                for v in item.warnings
            ]

    def refused_before_writing(self, result: IngestResult, unresolved: list[Any]) -> None:
        """The forms a strict context refused before the write (``unknown_predicate`` from
        the normalization's predicate check): new predicates ``refused``, as the ones the
        fact writer refuses, which the pipeline records as drift."""
        observed = {entry["name"]: entry for entry in result.new_predicates}
        for u in unresolved:
            canonical = str((u.details or {}).get("canonical", ""))
            if u.code != "unknown_predicate" or not canonical:
                continue
            item = u.item
            form = str(item.get("predicate") or item.get("key") or item.get("verb") or "")
            target = item["object"] if item.get("object") is not None else item.get("value")
            example = f"{item.get('subject', '')} {form} {target}"
            self._new_predicate(observed, canonical, form, example, "refused")
        result.new_predicates = list(observed.values())

    def _new_predicate(
        self, observed: dict[str, dict[str, Any]], name: str, form: str, example: str, status: str
    ) -> None:
        entry = observed.get(name)
        if entry is None:  # (not setdefault: its default would be built for every fact)
            entry = observed[name] = {"name": name, "forms": [], "status": status, "examples": []}
        if form not in entry["forms"]:
            entry["forms"].append(form)
        if len(entry["examples"]) < 3:
            entry["examples"].append(example)


def _example(draft: Any) -> str:
    target = draft.object.name if draft.object is not None else draft.value
    return f"{draft.subject.name} {draft.predicate} {target}"


def refused_forms(result: IngestResult) -> list[str]:
    return [form for p in result.new_predicates if p["status"] == "refused" for form in p["forms"]]


def new_predicate_examples_note(context: Context, result: IngestResult, *, status: str) -> None:
    """Drift keeps an example of how each new predicate was used (for the drift page)."""
    examples = {
        e["name"]: e["examples"][0]
        for e in result.new_predicates
        if e["status"] == status and e["examples"]
    }
    if not examples:
        return
    # One read finds the few that still lack an example; usually none.
    missing = Predicate.objects.filter(
        context=context, name__in=list(examples), status=PredicateStatus.OBSERVED, example=""
    ).values_list("pk", "name")
    for pk, name in list(missing):
        Predicate.objects.filter(pk=pk, example="").update(example=examples[name][:2000])
