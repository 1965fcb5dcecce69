"""The embedded PostgreSQL (with pgvector) used when ``DATABASE_URL`` is not set.

``pgserver`` ships PostgreSQL 16 binaries with pgvector; this module uses only those
binaries and runs the server's lifecycle itself, because pgserver's own (a JSON list of
pids rewritten in place, ``.handle_pids.json``) broke for good when a process was killed
while writing it (docs/decisions/0034).

The rules, each safe against a SIGKILL at any instant:

- **Mutual exclusion** of start and stop is a ``flock`` on ``<pgdata>.lock`` beside the data
  folder; the kernel drops it when its holder dies, so no lock is ever left behind.
- **Who uses the server** is a shared ``flock`` that each process holds on
  ``<pgdata>.handles`` for its lifetime. A process leaving takes the start/stop lock and asks
  for the handles file exclusively without waiting: it succeeds only when no other live
  process holds it, and then (and only then) stops the server. A killed process's share
  vanishes with it, so the count can never go wrong.
- **A new data folder** is made by ``initdb`` in a temporary sibling folder and renamed into
  place, so a half-made cluster never sits where a real one is expected.
- **Starting** and stopping the server itself: ``embedded_server``. Hot standbys of it:
  ``embedded_replicas``.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import logging
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from memory.infra.embedded_server import (
    DATABASE_NAME,
    LEGACY_HANDLES_FILE,
    START_TIMEOUT_S,
    ensure_running,
    exclusive_lock,
    give_to_server_user,
    is_cluster,
    live_postmaster,
    remove_empty_folder,
    run_tool,
    server_binary,
    server_stop,
    sibling_path,
    socket_url,
    write_tuning,
)

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


def embedded_database_url(pgdata: Path, *, tuning: Mapping[str, str] = TUNING) -> str:
    """Start (or join) the embedded server and return a URL for the project database.

    The calling process holds a share of the server until it exits; the last one to
    leave stops it."""
    pgdata = pgdata.expanduser().resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    # pgserver's import asks platformdirs for a runtime folder, which warns when unset.
    os.environ.setdefault("XDG_RUNTIME_DIR", str(pgdata.parent / "run"))
    Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(parents=True, exist_ok=True, mode=0o700)
    with exclusive_lock(sibling_path(pgdata, ".lock")):
        _ensure_initialised(pgdata)
        write_tuning(pgdata, tuning)
        postmaster = ensure_running(pgdata)
        socket_dir = postmaster.socket_dir or pgdata
        _ensure_database(socket_dir)
        _join(pgdata)
    return socket_url(socket_dir)


def stop_server(pgdata: Path) -> bool:
    """Stop the server if it runs (a fast shutdown: sessions end, committed work stays).
    Returns whether one was running. For tests and tools; processes normally leave."""
    pgdata = pgdata.expanduser().resolve()
    with exclusive_lock(sibling_path(pgdata, ".lock")):
        if live_postmaster(pgdata) is None:
            return False
        server_stop(pgdata)
        return True


# --- locks and handles --------------------------------------------------------------


@dataclass
class _Share:
    """This process's shared lock on ``<pgdata>.handles``."""

    pgdata: Path
    file: IO[str]
    owner_pid: int


_shares: dict[Path, _Share] = {}


def _join(pgdata: Path) -> None:
    if pgdata in _shares and _shares[pgdata].owner_pid == os.getpid():
        return
    handle = sibling_path(pgdata, ".handles").open("a")
    fcntl.flock(handle, fcntl.LOCK_SH)
    _shares[pgdata] = _Share(pgdata, handle, os.getpid())


def _leave_all() -> None:
    for share in list(_shares.values()):
        if share.owner_pid == os.getpid():
            _leave(share)


def _leave(share: _Share) -> None:
    """Stop the server if this process is the last one holding a share."""
    _shares.pop(share.pgdata, None)
    try:
        with exclusive_lock(sibling_path(share.pgdata, ".lock")):
            try:
                # Converting a shared flock to an exclusive one is not atomic (the share is
                # dropped first), which is harmless here: this process is leaving anyway.
                fcntl.flock(share.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # another live process still uses the server
            if live_postmaster(share.pgdata) is not None:
                server_stop(share.pgdata)
    except Exception:  # at interpreter exit: report, never raise
        logger.exception("could not stop the embedded PostgreSQL in %s", share.pgdata)
    finally:
        share.file.close()


def _after_fork_in_child() -> None:
    """A forked child takes its own share: one inherited from the parent is the same open
    file, so the parent leaving would otherwise count the child as gone."""
    for pgdata, share in list(_shares.items()):
        inherited = share.file
        with contextlib.suppress(OSError):
            _shares.pop(pgdata)
            _join(pgdata)
            inherited.close()


atexit.register(_leave_all)
os.register_at_fork(after_in_child=_after_fork_in_child)


# --- the data folder ----------------------------------------------------------------


def _ensure_initialised(pgdata: Path) -> None:
    for half_made in pgdata.parent.glob(f".{pgdata.name}.init-*"):
        logger.warning("removing %s, left by an initdb that did not finish", half_made)
        shutil.rmtree(half_made, ignore_errors=True)
    if is_cluster(pgdata):
        (pgdata / LEGACY_HANDLES_FILE).unlink(missing_ok=True)
        return
    if pgdata.exists():
        remove_empty_folder(pgdata)
    staging = pgdata.parent / f".{pgdata.name}.init-{os.getpid()}"
    staging.mkdir(mode=0o700)
    give_to_server_user(staging)
    logger.info("initialising the embedded PostgreSQL in %s", pgdata)
    run_tool(
        [
            server_binary("initdb"),
            "-D",
            str(staging),
            "--auth=trust",
            "--auth-local=trust",
            "--encoding=utf8",
            "-U",
            "postgres",
        ],
        timeout=START_TIMEOUT_S,
    )
    os.rename(staging, pgdata)


def _ensure_database(socket_dir: Path) -> None:
    import psycopg

    with psycopg.connect(
        host=str(socket_dir), user="postgres", dbname="postgres", autocommit=True
    ) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]
        ).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
