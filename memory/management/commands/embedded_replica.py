"""``manage.py embedded_replica start|stop|status [NAME…]``: hot standbys of the embedded
PostgreSQL, for trying read replicas on one machine (docs/DEPLOY.md "Read replicas").

Each replica is a ``pg_basebackup -R`` copy of the embedded primary in
``MEMORY_VAR_DIR/replicas/NAME``, streaming from it over its Unix socket. ``start`` prints
``DATABASE_REPLICA_URLS`` for the replicas it started; they run until ``stop``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.infra.embedded_replicas import replica_start, replica_status, replica_stop
from memory.infra.embedded_server import EmbeddedDatabaseError

NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,30}$")


def replicas_folder() -> Path:
    return Path(settings.VAR_DIR) / "replicas"


class Command(BaseCommand):
    help = "Start, stop or list hot standbys of the embedded PostgreSQL."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["start", "stop", "status"])
        parser.add_argument(
            "names",
            nargs="*",
            help="replica names (default for start: replica-1; for stop and status: all)",
        )
        parser.add_argument(
            "--remove", action="store_true", help="with stop: delete the replicas' data too"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        names: list[str] = options["names"]
        for name in names:
            if not NAME.match(name):
                raise CommandError(
                    f"replica names are lower-case letters, digits, - and _: {name!r}"
                )
        if _external_primary():
            raise CommandError(
                "DATABASE_URL is set: the primary is not the embedded server. Make replicas "
                "of an external PostgreSQL with its own tools (docs/DEPLOY.md)."
            )
        try:
            getattr(self, f"_{options['action']}")(names, options["remove"])
        except EmbeddedDatabaseError as exc:
            raise CommandError(str(exc)) from exc

    def _start(self, names: list[str], remove: bool) -> None:
        urls = []
        for name in names or ["replica-1"]:
            url = replica_start(Path(settings.VAR_DIR) / "pgdata", replicas_folder() / name)
            self.stderr.write(f"{name}: streaming from the primary")
            urls.append(url)
        self.stdout.write(f"DATABASE_REPLICA_URLS={','.join(urls)}")

    def _stop(self, names: list[str], remove: bool) -> None:
        for name in names or _existing():
            was_running = replica_stop(replicas_folder() / name, remove=remove)
            state = "stopped" if was_running else "was not running"
            self.stdout.write(f"{name}: {state}{', removed' if remove else ''}")

    def _status(self, names: list[str], remove: bool) -> None:
        found = names or _existing()
        if not found:
            self.stdout.write("no replicas (manage.py embedded_replica start NAME)")
        for name in found:
            status = replica_status(replicas_folder() / name)
            self.stdout.write(
                f"{name}: {'running ' + (status.url or '') if status.running else 'stopped'}"
            )


def _existing() -> list[str]:
    folder = replicas_folder()
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def _external_primary() -> bool:
    from memory.infra.env import env_str

    return bool(env_str("DATABASE_URL"))
