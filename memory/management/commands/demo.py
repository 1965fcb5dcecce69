"""``manage.py demo``: a ready-to-explore Memory Desk on 127.0.0.1 in one command.

Migrates, creates the ``demo`` context, loads a small memory through the same services
the API uses — with vocabulary drift, near-duplicate entities, a supersession chain and a
low-confidence conflict for curators to find — creates a ``curator`` login and an API
token, prints how to reach them, and serves (with a task worker for embeddings).
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from memory.access import ContextAccess, system_access
from memory.embeddings import embedder_warm_up
from memory.models import Context, ContextMembership, Entity, Fact, Role, SourceKind
from memory.services.contexts import context_create
from memory.services.entities import IdentifierInput, entity_upsert
from memory.services.facts import fact_write
from memory.services.tokens import token_issue

DEMO_SLUG = "demo"
DEMO_USER = "curator"
# The registry, seeding and tokens are an admin's (SPEC §7): a second login shows them.
DEMO_ADMIN = "admin"
ACME, ALEX, GLOBEX = "org/acme", "org/acme/user/alex", "org/globex"


@dataclass(frozen=True)
class DemoEntity:
    name: str
    type: str
    scope: str
    aliases: tuple[str, ...] = ()
    identifiers: tuple[tuple[str, str], ...] = ()
    attributes: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class DemoFact:
    subject: str
    predicate: str  # as an agent might have written it: variants are the point
    object: str | None = None
    value: str | None = None
    confidence: float = 0.9
    valid_from: str | None = None  # ISO date
    scope: str | None = None  # default: the subject's scope


# Keys are how DEMO_FACTS refer to entities; several are deliberate near-duplicates.
DEMO_ENTITIES: dict[str, DemoEntity] = {
    "acme": DemoEntity("Acme Corp", "organisation", ACME, ("Acme",), (("domain", "acme.example"),)),
    "alex": DemoEntity("Alex Rivera", "person", ACME, ("Alex",), (("email", "alex@acme.example"),)),
    "maria": DemoEntity("Maria Chen", "person", ACME, (), (("email", "maria@acme.example"),)),
    "priya": DemoEntity(
        "Priya Patel", "person", ACME, (), (), (("date_of_birth", "1988-04-12"), ("city", "Berlin"))
    ),
    "jon": DemoEntity("Jon Smith", "person", ACME, (), (("email", "jon.smith@acme.example"),)),
    "john": DemoEntity("John Smith", "person", ACME),
    "phoenix": DemoEntity(
        "Project Phoenix", "project", ACME, ("Phoenix",), (), (("status", "in progress"),)
    ),
    "platform": DemoEntity("Data Platform Team", "team", ACME),
    "kubernetes": DemoEntity("Kubernetes", "product", ACME, ("k8s",)),
    "berlin": DemoEntity("Berlin", "city", ACME),
    "offsite": DemoEntity("Q3 Planning Offsite", "event", ACME),
    "remote": DemoEntity("Remote Work Policy", "policy", ACME),
    "globex_at_acme": DemoEntity("Globex", "company", ACME),
    "dana": DemoEntity("Dana Lee", "person", ALEX),
    "rust": DemoEntity("Rust", "topic", ALEX),
    "marathon": DemoEntity("Marathon Training", "project", ALEX),
    "globex": DemoEntity(
        "Globex Corporation", "organisation", GLOBEX, (), (("domain", "globex.example"),)
    ),
    "acme_at_globex": DemoEntity("ACME Inc.", "company", GLOBEX, (), (("domain", "acme.example"),)),
    "hannah": DemoEntity("Hannah Ortiz", "person", GLOBEX),
    # Priya again, from another source: one letter and a day/month swap apart.
    "priya_at_globex": DemoEntity(
        "Priya Patil",
        "person",
        GLOBEX,
        attributes=(("date_of_birth", "1988-12-04"), ("city", "Berlin")),
    ),
    "cypress": DemoEntity("Cypress Creek", "city", GLOBEX),
    "hammock": DemoEntity("Project Hammock", "project", GLOBEX),
}

DEMO_FACTS: tuple[DemoFact, ...] = (
    # One concept, many spellings: works_at (registered) with its drifting variants.
    DemoFact("alex", "worksAt", "acme"),
    DemoFact("maria", "employed_by", "acme"),
    DemoFact("jon", "works_for", "acme"),
    DemoFact("john", "worksFor", "acme"),
    DemoFact("priya", "joined", "acme", valid_from="2023-02-01"),
    DemoFact("hannah", "works_at", "globex"),
    DemoFact("hannah", "works_for", "globex"),
    DemoFact("alex", "collaborates_with", "priya"),
    DemoFact("jon", "collaborates_with", "john"),
    DemoFact("acme", "isLocatedIn", "berlin"),
    DemoFact("globex", "located_in", "cypress"),
    DemoFact("globex_at_acme", "isLocatedIn", "cypress", confidence=0.6),
    # Registered relations.
    DemoFact("alex", "reports_to", "maria"),
    DemoFact("maria", "manages", "alex"),
    DemoFact("priya", "is_member_of", "platform"),
    DemoFact("alex", "works_with", "jon"),
    DemoFact("phoenix", "depends_on", "kubernetes"),
    DemoFact("alex", "attended", "offsite"),
    DemoFact("maria", "hosted", "offsite"),
    DemoFact("platform", "part_of", "acme"),
    DemoFact("remote", "part_of", "acme", confidence=0.7),
    DemoFact("hannah", "met_with", "alex", confidence=0.8),
    DemoFact("globex", "owns", "hammock"),
    DemoFact("acme_at_globex", "merged_with", "globex", confidence=0.3),
    # Single-valued titles: later values supersede, keeping the history.
    DemoFact("alex", "current_title", value="Software Engineer", valid_from="2021-04-01"),
    DemoFact("alex", "current_title", value="Senior Software Engineer", valid_from="2023-07-01"),
    DemoFact(
        "alex", "current_title", value="Staff Engineer", confidence=0.95, valid_from="2025-01-15"
    ),
    DemoFact("maria", "current_title", value="Engineering Manager", valid_from="2020-09-01"),
    DemoFact("maria", "current_title", value="Director of Engineering", valid_from="2024-03-01"),
    # A low-confidence rumour cannot replace a confident value: a conflict for curators.
    DemoFact("priya", "current_title", value="Data Scientist", confidence=0.9),
    DemoFact("priya", "current_title", value="Head of Data", confidence=0.5),
    # Alex's private notes live in Alex's own scope.
    DemoFact("alex", "expressed_interest", "rust", scope=ALEX),
    DemoFact("alex", "knows", "dana", scope=ALEX),
    DemoFact("dana", "tracks_priority", "marathon", scope=ALEX),
    DemoFact("alex", "committed_to", "phoenix", scope=ALEX, confidence=0.8),
)


class Command(BaseCommand):
    help = (
        "Migrate, load a demo memory (drift, duplicates, history, a conflict), create a "
        "'curator' login and an API token, and serve on 127.0.0.1."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--no-serve", action="store_true", help="set up, then exit")
        parser.add_argument("--addrport", default="127.0.0.1:8000", help="where to serve")
        parser.add_argument("--reset", action="store_true", help="delete and reload the demo")

    def handle(self, *args: Any, **options: Any) -> None:
        self.stderr.write("Preparing the database…")
        call_command("migrate", interactive=False, verbosity=0)
        context = Context.objects.filter(slug=DEMO_SLUG).first()
        if context is not None and options["reset"]:
            _demo_delete(context)
            context = None
        if context is None:
            context = context_create(
                slug=DEMO_SLUG, name="Demo", description="A small memory to explore Memory Desk"
            )
        # Loaded once: rewriting the title history would supersede it again on every run.
        if Entity.objects.filter(context=context).exists():
            self.stderr.write("The demo memory is already loaded (--reset reloads it).")
        else:
            entities, facts = demo_load(access=system_access(context))
            self.stderr.write(f"Loaded {entities} entities and {facts} facts into '{DEMO_SLUG}'.")
        password, token = _login(context, DEMO_USER, Role.CURATOR, with_token=True)
        admin_password, _ = _login(context, DEMO_ADMIN, Role.ADMIN, with_token=False)
        base = f"http://{options['addrport']}"
        self.stdout.write(
            "\n".join(
                [
                    "",
                    f"Dashboard   {base}/",
                    f"API docs    {base}/api/docs/",
                    f"Health      {base}/api/v1/health",
                    f"MCP         {base}/mcp   (streamable HTTP; header as below)",
                    "",
                    f"Login       {DEMO_USER} / {password}   (shown once; rerun to reset)",
                    f"Admin       {DEMO_ADMIN} / {admin_password}   (registry, seeding, tokens)",
                    f"API token   {token}",
                    f'Try         curl -H "Authorization: Token {token}" '
                    f"{base}/api/v1/contexts/{DEMO_SLUG}/predicates",
                    f"MCP client  claude mcp add --transport http memory-desk {base}/mcp "
                    f'--header "Authorization: Token {token}"',
                    "",
                ]
            )
        )
        if not options["no_serve"]:
            _serve(options["addrport"])


def _serve(addrport: str) -> None:
    """runserver, with a task worker beside it to compute the demo's embeddings. The
    embedding model starts loading now, so no first page waits for it."""
    embedder_warm_up()
    worker = subprocess.Popen(
        [sys.executable, "-m", "django", "db_worker"],
        cwd=settings.BASE_DIR,
        env={"DJANGO_SETTINGS_MODULE": "memory.settings", **os.environ},
    )
    # A plain `kill` of the demo must stop the worker too: turn SIGTERM into SystemExit
    # so the finally below runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        # --insecure lets runserver serve the CSS with DEBUG off.
        call_command("runserver", addrport, use_reloader=False, insecure_serving=True)
    finally:
        worker.terminate()
        worker.wait(timeout=30)


@transaction.atomic
def _demo_delete(context: Context) -> None:
    """Delete the demo context; facts go first since they PROTECT entities and predicates."""
    Fact.objects.filter(context=context).delete()
    Entity.objects.filter(context=context).update(merged_into=None)
    context.delete()


@transaction.atomic
def demo_load(*, access: ContextAccess) -> tuple[int, int]:
    """Write the demo memory through the services; all or nothing."""
    ids: dict[str, Entity] = {}
    for key, spec in DEMO_ENTITIES.items():
        ids[key] = entity_upsert(
            access=access,
            name=spec.name,
            type=spec.type,
            scope=spec.scope,
            aliases=list(spec.aliases),
            identifiers=[IdentifierInput(kind, value) for kind, value in spec.identifiers],
            attributes=dict(spec.attributes),
        ).entity
    for fact in DEMO_FACTS:
        fact_write(
            access=access,
            subject=ids[fact.subject],
            predicate=fact.predicate,
            object=ids[fact.object] if fact.object else None,
            value=fact.value,
            confidence=fact.confidence,
            valid_from=_date(fact.valid_from),
            scope=fact.scope,
            source_kind=SourceKind.SEED,
            source_ref="manage.py demo",
        )
    return len(DEMO_ENTITIES), len(DEMO_FACTS)


def _date(iso: str | None) -> datetime | None:
    return datetime.fromisoformat(iso).replace(tzinfo=UTC) if iso else None


@transaction.atomic
def _login(
    context: Context, username: str, role: Role, *, with_token: bool
) -> tuple[str, str | None]:
    """(Re)set a demo login's password and role, and issue it a token when asked;
    neither is stored in clear."""
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        user = get_user_model().objects.create_user(username=username)
    password = secrets.token_urlsafe(12)
    user.set_password(password)
    user.save(update_fields=["password"])
    ContextMembership.objects.update_or_create(user=user, context=context, defaults={"role": role})
    if not with_token:
        return password, None
    token = token_issue(user=user, context=context, grants=["read,write:*"], name="demo")
    return password, token.raw
