"""The embedded PostgreSQL (with pgvector) used when ``DATABASE_URL`` is not set.

``pgserver`` ships PostgreSQL 16 binaries with pgvector. The first process to ask starts
the server on a Unix socket inside ``var/pgdata``; later processes find the running
postmaster and reuse it. pgserver keeps a list of the processes holding a handle and
stops the server cleanly (``pg_ctl stop``) when the last one exits.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from urllib.parse import quote

DATABASE_NAME = "memorydesk"

# Sized for ~1M facts / 100k chunks / 100k entities on a 2-core, 24 GB machine: a
# quarter of RAM would starve the embedder and web workers, so the buffer cache gets
# 4 GB and the planner is told the OS cache holds the rest. HNSW builds want a large
# maintenance_work_mem to stay in memory.
TUNING: dict[str, str] = {
    "shared_buffers": "4GB",
    "effective_cache_size": "14GB",
    "work_mem": "32MB",
    "maintenance_work_mem": "2GB",
    "max_connections": "200",
    "max_worker_processes": "4",
    "max_parallel_workers": "2",
    "max_parallel_workers_per_gather": "1",
    "max_parallel_maintenance_workers": "1",
    "random_page_cost": "1.1",
    "effective_io_concurrency": "64",
    "wal_buffers": "16MB",
    "max_wal_size": "4GB",
    "checkpoint_completion_target": "0.9",
    "jit": "off",
}

logger = logging.getLogger(__name__)


def embedded_database_url(pgdata: Path) -> str:
    """Start (or join) the embedded server and return a URL for the project database."""
    os.environ.setdefault("XDG_RUNTIME_DIR", str(pgdata.parent / "run"))
    Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(parents=True, exist_ok=True, mode=0o700)
    import pgserver

    pgdata.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(pgdata, cleanup_mode="stop")
    _apply_tuning(server)
    _ensure_database(server)
    socket_dir = server.get_postmaster_info().socket_dir
    return f"postgresql://postgres@/{DATABASE_NAME}?host={quote(str(socket_dir), safe='')}"


def _apply_tuning(server: object) -> None:
    """Set TUNING once; shared_buffers and max_connections need a restart to apply."""
    import psycopg
    from pgserver import _commands

    uri = server.get_uri()  # type: ignore[attr-defined]
    with psycopg.connect(uri, autocommit=True) as conn:
        known = {row[0] for row in conn.execute("SELECT name FROM pg_settings")}
        buffers = conn.execute("SHOW shared_buffers").fetchone()
        if buffers and buffers[0] == TUNING["shared_buffers"]:
            return
        for name, value in TUNING.items():
            if name in known:
                conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
    logger.info("Restarting the embedded PostgreSQL to apply memory settings")
    _commands.pg_ctl(["-w", "restart"], pgdata=server.pgdata, user=server.system_user, timeout=60)  # type: ignore[attr-defined]
    server.ensure_postgres_running()  # type: ignore[attr-defined]


def _ensure_database(server: object) -> None:
    import psycopg

    with psycopg.connect(server.get_uri(), autocommit=True) as conn:  # type: ignore[attr-defined]
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]
        ).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
