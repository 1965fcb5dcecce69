"""``manage.py search QUERY --context SLUG [--mode] [--k] [--target] [--thread] [--scope]
[--json]``."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.domain.access import system_access
from memory.kernel.errors import DomainError
from memory.models import Context
from memory.selectors.search import MODES, TARGETS, search


def _rank(part: dict[str, Any] | None) -> str:
    return f"#{part['rank']} {part['score']:.3f}" if part else "—"


class Command(BaseCommand):
    help = "Search a context's chunks, facts or entities, with each result's explanation."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("query")
        parser.add_argument("--context", required=True, help="context slug")
        parser.add_argument("--mode", choices=MODES, default="hybrid")
        parser.add_argument("--k", type=int, default=10)
        parser.add_argument("--target", choices=list(TARGETS), default="chunks")
        parser.add_argument(
            "--scope", action="append", help="scope pattern (P or P/*); repeat for more"
        )
        parser.add_argument("--thread", help="--target turns: only this conversation's turns")
        parser.add_argument("--graph-alpha", type=float, default=0.3)
        parser.add_argument("--json", action="store_true", help="print the API's JSON shape")

    def handle(self, *args: Any, **options: Any) -> None:
        context = Context.objects.filter(slug=options["context"]).first()
        if context is None:
            raise CommandError(f"no context {options['context']!r}")
        try:
            response = search(
                access=system_access(context),
                query=options["query"],
                mode=options["mode"],
                k=options["k"],
                scopes=options["scope"],
                target=options["target"],
                graph_alpha=options["graph_alpha"],
                thread=options["thread"],
            )
        except DomainError as exc:
            raise CommandError(getattr(exc, "message", str(exc))) from exc
        body = asdict(response)
        body.pop("hidden", None)  # the dashboard's vector floor; the API shape has none
        if options["json"]:
            self.stdout.write(json.dumps(body, indent=2, ensure_ascii=False))
            return
        for rank, result in enumerate(body["results"], start=1):
            explain = result["explain"]
            text = " ".join(result["text"].split())
            self.stdout.write(
                f"{rank:>3}. {result['score']:.4f}  {result['type']} {result['id']}  "
                f"[{result['scope']}]  {text[:100]}"
            )
            extras = [f"bm25 {_rank(explain['bm25'])}", f"vector {_rank(explain['vector'])}"]
            if explain["fused"] is not None:
                extras.append(f"fused {explain['fused']:.4f}")
            if explain["graph_boost"] is not None:
                extras.append(f"graph +{explain['graph_boost']:.4f}")
            if result["type"] == "turn":
                meta = result["meta"]
                said = [meta[k] for k in ("speaker", "said_at", "thread", "ref") if meta[k]]
                extras.insert(0, " · ".join(str(v) for v in said) or "turn")
            self.stdout.write("      " + ", ".join(extras))
        self.stdout.write(f"{len(body['results'])} results in {body['took_ms']:.1f} ms")
