"""``manage.py fsck --context SLUG [--check duplicates|orphans|vocabulary|validity …] [--json]``:
the API's consistency checks (``memory.services.fsck``) from cron or CI, with an exit
status that says whether they found problems."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.domain.access import system_access
from memory.kernel.errors import DomainError
from memory.models import Context
from memory.services.fsck import CHECKS, fsck_run

SHOWN = 5  # findings listed per check in the summary; --json has the service's samples
EXIT_PROBLEMS = 1
EXIT_CANNOT_RUN = 2


class Command(BaseCommand):
    help = (
        "Run consistency checks over a context with system access and report what they "
        "find (nothing is repaired; the duplicates check stores the candidate pairs it "
        "finds, as the API's fsck does, for the duplicates page). Problems: open duplicate "
        "clusters, facts on merged entities, superseded single-valued facts without a "
        "successor, observed predicates not registered (entities without facts are "
        f"reported, not counted). Exit status: 0 no problems, {EXIT_PROBLEMS} problems "
        f"found, {EXIT_CANNOT_RUN} the checks could not run (unknown context or check)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--context", required=True, help="context slug")
        parser.add_argument(
            "--check",
            action="append",
            choices=CHECKS,
            help="a check to run; repeat for more (default: all)",
        )
        parser.add_argument(
            "--json", action="store_true", help="print the API's report (POST fsck) as JSON"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        context = Context.objects.filter(slug=options["context"]).first()
        if context is None:
            raise CommandError(f"no context {options['context']!r}", returncode=EXIT_CANNOT_RUN)
        access = system_access(context)
        checks = [name for name in CHECKS if name in (options["check"] or CHECKS)]
        report: dict[str, Any] = {}
        for name in checks:  # one at a time, so a long scan says which check it is in
            self.stderr.write(f"{name}: checking…")
            started = time.perf_counter()
            try:
                report.update(fsck_run(access=access, checks=[name]))
            except DomainError as exc:
                raise CommandError(exc.message, returncode=EXIT_CANNOT_RUN) from exc
            self.stderr.write(f"{name}: done in {time.perf_counter() - started:.1f} s")
        summaries = {name: _SUMMARIES[name](report[name]) for name in checks}
        if options["json"]:
            self.stdout.write(json.dumps(report, indent=2, ensure_ascii=False))
        else:
            for _, lines in summaries.values():
                self.stdout.write("\n".join(lines))
        found = {name: problems for name, (problems, _) in summaries.items() if problems}
        if found:
            each = ", ".join(f"{name} {n}" for name, n in found.items())
            raise CommandError(
                f"{_count(sum(found.values()), 'problem')} found in {context.slug} ({each})",
                returncode=EXIT_PROBLEMS,
            )
        if not options["json"]:
            self.stdout.write(f"no problems in {context.slug}")


def _count(n: int, noun: str, plural: str = "") -> str:
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def _more(shown: int, total: int) -> list[str]:
    return [f"  … and {total - shown} more"] if total > shown else []


def _duplicates(result: dict[str, Any]) -> tuple[int, list[str]]:
    clusters = result["clusters"]
    lines = [
        f"duplicates: {_count(clusters, 'open cluster')} of likely duplicate entities "
        f"({_count(result['entities_scanned'], 'entity', 'entities')} scanned, "
        f"{_count(result['new_pairs'], 'new candidate pair')})"
    ]
    for cluster in result["top"][:SHOWN]:
        members = ", ".join(f"#{m['id']} {m['name']} ({m['type']})" for m in cluster["members"])
        lines.append(f"  {cluster['score']:.2f}  {members}  [{', '.join(cluster['methods'])}]")
    return clusters, lines + _more(min(len(result["top"]), SHOWN), clusters)


def _orphans(result: dict[str, Any]) -> tuple[int, list[str]]:
    on_merged = result["facts_on_merged_entities"]
    dangling = result["superseded_without_successor"]
    sample = ", ".join(f"#{pk}" for pk in result["facts_on_merged_entities_sample"][:SHOWN])
    lines = [
        f"orphans: {_count(on_merged + dangling, 'problem')}",
        f"  {_count(on_merged, 'fact')} on merged entities" + (f": {sample}" if sample else ""),
        *_more(min(len(result["facts_on_merged_entities_sample"]), SHOWN), on_merged),
        f"  {_count(dangling, 'superseded single-valued fact')} without a successor",
        f"  {_count(result['entities_without_facts'], 'entity', 'entities')} without facts "
        "(not a problem)",
    ]
    return on_merged + dangling, lines


def _vocabulary(result: dict[str, Any]) -> tuple[int, list[str]]:
    observed = result["observed_predicates"]
    lines = [
        f"vocabulary: {_count(observed, 'observed predicate')} not registered; "
        f"{result['registered_share']:.1%} of {_count(result['current_facts'], 'current fact')} "
        "use registered predicates"
    ]
    names = result["observed_sample"][:SHOWN]
    if names:
        lines.append("  " + ", ".join(names))
    return observed, lines + _more(len(names), observed)


def _validity(result: dict[str, Any]) -> tuple[int, list[str]]:
    inverted = result["inverted_intervals"]
    crowded = result["slots_with_several_current_values"]
    sample = ", ".join(f"#{pk}" for pk in result["inverted_intervals_sample"][:SHOWN])
    lines = [
        f"validity: {_count(inverted + crowded, 'problem')}",
        f"  {_count(inverted, 'fact')} whose validity ends before it begins"
        + (f": {sample}" if sample else ""),
        *_more(min(len(result["inverted_intervals_sample"]), SHOWN), inverted),
        f"  {_count(crowded, 'single-valued slot')} with more than one current value",
    ]
    return inverted + crowded, lines


_SUMMARIES: dict[str, Callable[[dict[str, Any]], tuple[int, list[str]]]] = {
    "duplicates": _duplicates,
    "orphans": _orphans,
    "vocabulary": _vocabulary,
    "validity": _validity,
}
