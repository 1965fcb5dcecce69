"""``manage.py demo``: a ready-to-explore Memory Desk on 127.0.0.1 in one command.

Migrates, creates the ``demo`` context, loads a small memory through the same services
the API uses — with vocabulary drift, near-duplicate entities, a supersession chain, a
low-confidence conflict for curators to find, a few ingest runs (conversation turns
included) and documents — creates a ``curator`` and an ``admin`` login and an API token,
prints how to reach them, and serves (with a task worker for embeddings).

The logins and the token survive a restart: they are kept in ``var/demo-credentials.json``
(readable by the owner only; passwords and tokens are stored hashed in the database, so
this file is the only place their clear text lives) and printed again; ``--reset``
reloads the memory and issues new ones. A login whose password was changed since keeps it.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone

from memory.domain.access import ContextAccess, system_access
from memory.infra.embeddings import embedder_warm_up
from memory.models import (
    ApiToken,
    Context,
    ContextMembership,
    Entity,
    Fact,
    Role,
    Run,
    SourceKind,
)
from memory.selectors.drift import drift_suggestions_warm
from memory.services.contexts import context_create
from memory.services.entities.writes import IdentifierInput, entity_upsert
from memory.services.facts.write import fact_write
from memory.services.ingest.documents import document_create
from memory.services.ingest.run import run_create, run_execute
from memory.services.ingest.turns import turn_fields_clean
from memory.services.tokens import token_issue

DEMO_SLUG = "demo"
DEMO_USER = "curator"
# The registry, seeding and tokens are an admin's: a second login shows them.
DEMO_ADMIN = "admin"
ACME, ALEX, GLOBEX = "org/acme", "org/acme/user/alex", "org/globex"
DEMO_TOKEN_LABEL = "demo"  # noqa: S105  (the name the token is listed under)
CREDENTIALS_FILE = "demo-credentials.json"


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


@dataclass(frozen=True)
class DemoRun:
    """A memory written as an agent would (``POST memories``), executed at once."""

    scope: str
    infer: str  # "triples" or "none" (a conversation turn kept for search)
    text: str = ""
    triples: dict[str, Any] | None = None
    source: str = ""
    speaker: str = ""
    said_at: str | None = None
    thread: str = ""


def _triples(**lists: list[dict[str, Any]]) -> dict[str, Any]:
    return {key: lists.get(key, []) for key in ("entities", "relations", "attributes", "actions")}


DEMO_RUNS: tuple[DemoRun, ...] = (
    DemoRun(
        ACME,
        "triples",
        source="crm-sync",
        triples=_triples(
            entities=[
                {"name": "Priya Patel", "type": "person"},
                {"name": "Data Platform Team", "type": "team"},
            ],
            relations=[
                {"subject": "Priya Patel", "predicate": "leads", "object": "Data Platform Team"}
            ],
            attributes=[{"subject": "Priya Patel", "key": "office", "value": "Berlin HQ"}],
        ),
    ),
    # A turn with the facts an agent took from it: "Retract this turn's facts" has some.
    DemoRun(
        ACME,
        "triples",
        triples=_triples(
            entities=[
                {"name": "Alex Rivera", "type": "person"},
                {"name": "Project Phoenix", "type": "project"},
            ],
            relations=[
                {"subject": "Alex Rivera", "predicate": "works_on", "object": "Project Phoenix"}
            ],
            attributes=[
                {"subject": "Project Phoenix", "key": "milestone", "value": "migration plan"}
            ],
        ),
        text="I'll have the Phoenix migration plan ready before the Q3 offsite.",
        speaker="Alex Rivera",
        said_at="2025-06-02T09:15:00+00:00",
        thread="phoenix-standup",
    ),
    DemoRun(
        ACME,
        "none",
        text="Good. Hannah from Globex asked to see the plan too; send it to her on Friday.",
        speaker="Maria Chen",
        said_at="2025-06-02T09:16:30+00:00",
        thread="phoenix-standup",
    ),
)

DEMO_DOCUMENTS: tuple[tuple[str, str, str], ...] = (
    (
        "Remote Work Policy",
        ACME,
        "Acme Corp staff may work remotely up to three days a week. Teams agree on two "
        "shared office days in Berlin. Equipment for a home office is reimbursed up to 500 "
        "euros a year; security rules for laptops apply at home as in the office.",
    ),
    (
        "Project Phoenix kickoff notes",
        ACME,
        "Project Phoenix moves the Data Platform Team's services to Kubernetes. Alex Rivera "
        "owns the migration plan, Maria Chen sponsors the project, and Priya Patel's team "
        "migrates the data pipelines first. The plan is reviewed at the Q3 planning offsite.",
    ),
    (
        "Globex partnership memo",
        GLOBEX,
        "Globex Corporation and Acme discussed a data-sharing partnership. Hannah Ortiz leads "
        "it for Globex; Project Hammock would be the first shared project, starting with a "
        "pilot in Cypress Creek.",
    ),
)


class Command(BaseCommand):
    help = (
        "Migrate, load a demo memory (drift, duplicates, history, a conflict, runs and "
        "documents), create 'curator' and 'admin' logins and an API token (kept across "
        "restarts), and serve on 127.0.0.1."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--no-serve", action="store_true", help="set up, then exit")
        parser.add_argument("--addrport", default="127.0.0.1:8000", help="where to serve")
        parser.add_argument(
            "--reset",
            action="store_true",
            help="delete and reload the demo; new passwords and a new token",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["no_serve"]:
            _port_check(options["addrport"])  # before anything starts that would outlive us
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
            access = system_access(context)
            entities, facts = demo_load(access=access)
            runs = demo_runs_load(access=access)
            documents = demo_documents_load(access=access)
            self.stderr.write(
                f"Loaded {entities} entities, {facts} facts, {runs} runs and {documents} "
                f"documents into '{DEMO_SLUG}'."
            )
        kept = {} if options["reset"] else _credentials_read()
        password = _login(context, DEMO_USER, Role.CURATOR, kept=kept.get(DEMO_USER))
        admin_password = _login(context, DEMO_ADMIN, Role.ADMIN, kept=kept.get(DEMO_ADMIN))
        token = _token(context, DEMO_USER, kept=kept.get("token"))
        _credentials_write(
            {DEMO_USER: password, DEMO_ADMIN: admin_password, "token": token},
        )
        unchanged = "(changed since: kept; --reset sets a new one)"
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
                    f"Login       {DEMO_USER} / {password or unchanged}",
                    f"Admin       {DEMO_ADMIN} / {admin_password or unchanged}   "
                    "(registry, seeding, tokens)",
                    f"API token   {token}",
                    f'Try         curl -H "Authorization: Token {token}" '
                    f"{base}/api/v1/contexts/{DEMO_SLUG}/predicates",
                    f"MCP client  claude mcp add --transport http memory-desk {base}/mcp "
                    f'--header "Authorization: Token {token}"',
                    "",
                    "The logins and the token stay the same across restarts "
                    "(manage.py demo --reset issues new ones).",
                    "",
                ]
            )
        )
        if not options["no_serve"]:
            _serve(options["addrport"])


def _port_check(addrport: str) -> None:
    """Refuse at once, saying why, when something already listens on ``addrport`` (most
    often a demo started earlier): runserver would find out only after the task worker
    started, and exit without stopping it."""
    host, _, port = addrport.rpartition(":")
    if not port.isdigit():
        raise CommandError(f"--addrport {addrport!r}: give host:port, e.g. 127.0.0.1:8000")
    probe = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        probe.bind((host.strip("[]") or "127.0.0.1", int(port)))
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise CommandError(f"cannot serve on {addrport}: {exc.strerror}") from exc
        raise CommandError(
            f"{addrport} is already in use: is a demo already running? "
            f"Open http://{addrport}/ or stop it; or serve elsewhere, e.g. "
            f"manage.py demo --addrport 127.0.0.1:{int(port) + 1}"
        ) from exc
    finally:
        probe.close()


def _serve(addrport: str) -> None:
    """runserver, with a task worker beside it to compute the demo's embeddings. The
    embedding model starts loading now, so no first page waits for it; the worker starts
    once it is loaded (at a first start the model is built once, not by both processes)."""
    workers: list[subprocess.Popen[bytes]] = []
    stopping, lock = threading.Event(), threading.Lock()

    def start_worker(loading: threading.Thread | None = None) -> None:
        if loading is not None:
            loading.join()  # loaded or failed: imports need the worker either way
        with lock:
            if not stopping.is_set():
                workers.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "django", "db_worker"],
                        cwd=settings.BASE_DIR,
                        env={"DJANGO_SETTINGS_MODULE": "memory.settings", **os.environ},
                    )
                )

    loading = embedder_warm_up(then=drift_suggestions_warm)
    threading.Thread(target=start_worker, args=(loading,), daemon=True).start()
    # A plain `kill` of the demo must stop the worker too: turn SIGTERM into SystemExit
    # so the finally below runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        # --insecure lets runserver serve the CSS with DEBUG off.
        call_command("runserver", addrport, use_reloader=False, insecure_serving=True)
    finally:
        with lock:
            stopping.set()
        for worker in workers:
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


def demo_runs_load(*, access: ContextAccess) -> int:
    """Write ``DEMO_RUNS`` as ingest runs and execute them here (the Runs page and turn
    search have something to show); each run commits on its own, as in a worker."""
    for spec in DEMO_RUNS:
        run = run_create(
            access=access,
            text=spec.text,
            scope=spec.scope,
            infer=spec.infer,
            triples=spec.triples,
            source=spec.source or "manage.py demo",
            turn=turn_fields_clean(speaker=spec.speaker, said_at=spec.said_at, thread=spec.thread),
        )
        run_execute(run_id=run.pk)
    return Run.objects.filter(context=access.context).count()


def demo_documents_load(*, access: ContextAccess) -> int:
    """Store ``DEMO_DOCUMENTS`` (their vectors follow from the task worker)."""
    for title, scope, text in DEMO_DOCUMENTS:
        document_create(access=access, title=title, text=text, scope=scope, source="demo")
    return len(DEMO_DOCUMENTS)


def _credentials_path() -> Path:
    return Path(settings.VAR_DIR) / CREDENTIALS_FILE


def _credentials_read() -> dict[str, str]:
    """The clear-text logins and token an earlier start printed ({} when none)."""
    try:
        data = json.loads(_credentials_path().read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) else {}


def _credentials_write(credentials: dict[str, str | None]) -> None:
    """Keep what this start printed for the next one, readable by the owner only."""
    path = _credentials_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    kept = {k: v for k, v in credentials.items() if v}
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        json.dump(kept, file)
    path.chmod(0o600)


@transaction.atomic
def _login(context: Context, username: str, role: Role, *, kept: str | None) -> str | None:
    """Make sure a demo login exists with ``role`` in the context. Its password: ``kept``
    when it still signs in; a new one for a new login, or when there is nothing to keep
    (``--reset``, a lost file). None when the login's password was changed since the
    file was written: it is the owner's now and stays."""
    user = get_user_model().objects.filter(username=username).first()
    created = user is None
    if user is None:
        user = get_user_model().objects.create_user(username=username)
    ContextMembership.objects.update_or_create(user=user, context=context, defaults={"role": role})
    if kept and user.check_password(kept):
        return kept
    if kept and not created:
        return None
    password = secrets.token_urlsafe(12)
    user.set_password(password)
    user.save(update_fields=["password"])
    return password


@transaction.atomic
def _token(context: Context, username: str, *, kept: str | None) -> str:
    """The demo's one full-access token: ``kept`` while it still authenticates; otherwise
    a new one, and every other demo token of the login in this context is revoked."""
    user = get_user_model().objects.get(username=username)
    tokens = ApiToken.objects.filter(
        user=user, context=context, name=DEMO_TOKEN_LABEL, revoked_at__isnull=True
    )
    if kept and tokens.filter(digest=ApiToken.digest_of(kept)).exists():
        return kept
    tokens.update(revoked_at=timezone.now())
    issued = token_issue(user=user, context=context, grants=["read,write:*"], name=DEMO_TOKEN_LABEL)
    return issued.raw
