"""Hot standbys of the embedded server, each in a data folder of its own: made by
``pg_basebackup -R`` from the running primary, started, stopped and asked about
(``manage.py embedded_replica``, the replica tests and benchmarks)."""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from memory.infra.embedded_db import TUNING
from memory.infra.embedded_server import (
    EmbeddedDatabaseError,
    clear_leftovers,
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

logger = logging.getLogger(__name__)

# A hot standby must allow at least as many connections and workers as its primary (else
# it refuses to start), so only the memory sizes are smaller: the replicas share the
# machine with the primary.
REPLICA_TUNING: dict[str, str] = {
    **TUNING,
    "shared_buffers": "256MB",
    "effective_cache_size": "2GB",
    "maintenance_work_mem": "64MB",
    # Tell the primary which rows a standby query still reads, so vacuum on the primary
    # does not cancel a long search on the standby.
    "hot_standby_feedback": "on",
}


@dataclass(frozen=True)
class ReplicaStatus:
    """What a replica's data folder and server say about it."""

    folder: Path
    running: bool
    url: str | None


def replica_start(primary: Path, folder: Path) -> str:
    """Start a hot standby of the running embedded primary in ``folder`` (made on first
    use by ``pg_basebackup -R``, which copies the whole cluster and writes the standby's
    ``primary_conninfo``) and return a URL for its copy of the project database.

    The standby runs detached until :func:`replica_stop`; while the primary is down it
    waits and reconnects by itself."""
    primary = primary.expanduser().resolve()
    folder = folder.expanduser().resolve()
    postmaster = live_postmaster(primary)
    if postmaster is None:
        raise EmbeddedDatabaseError(f"the embedded primary in {primary} is not running")
    folder.parent.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(sibling_path(folder, ".lock")):
        if not is_cluster(folder):
            _base_backup(postmaster.socket_dir or primary, folder)
        write_tuning(folder, REPLICA_TUNING)
        standby = ensure_running(folder, ready=("standby", "ready"))
    return socket_url(standby.socket_dir or folder)


def replica_stop(folder: Path, *, remove: bool = False) -> bool:
    """Stop the standby in ``folder`` (fast shutdown); ``remove`` also deletes its data.
    Returns whether it was running."""
    folder = folder.expanduser().resolve()
    if not folder.exists():
        return False
    with exclusive_lock(sibling_path(folder, ".lock")):
        running = live_postmaster(folder) is not None
        if running:
            server_stop(folder)
        if remove:
            clear_leftovers(folder)
            shutil.rmtree(folder, ignore_errors=True)
    if remove:
        sibling_path(folder, ".lock").unlink(missing_ok=True)
    return running


def replica_status(folder: Path) -> ReplicaStatus:
    folder = folder.expanduser().resolve()
    postmaster = live_postmaster(folder) if is_cluster(folder) else None
    url = socket_url(postmaster.socket_dir or folder) if postmaster else None
    return ReplicaStatus(folder=folder, running=postmaster is not None, url=url)


def _base_backup(primary_socket_dir: Path, folder: Path) -> None:
    """Copy the primary into a staging sibling and rename it into place, so a killed
    backup never leaves half a cluster where a standby is expected."""
    for half_made in folder.parent.glob(f".{folder.name}.init-*"):
        shutil.rmtree(half_made, ignore_errors=True)
    if folder.exists():
        remove_empty_folder(folder)
    staging = folder.parent / f".{folder.name}.init-{os.getpid()}"
    staging.mkdir(mode=0o700)
    give_to_server_user(staging)
    logger.info("copying the embedded primary into %s (pg_basebackup)", folder)
    run_tool(
        [
            server_binary("pg_basebackup"),
            "-D",
            str(staging),
            "-h",
            str(primary_socket_dir),
            "-U",
            "postgres",
            "-X",
            "stream",  # the WAL written during the copy comes along: a consistent start
            "-c",
            "fast",  # checkpoint now rather than at the primary's pace
            "-R",  # standby.signal and primary_conninfo: start as a streaming standby
        ],
        timeout=600,
    )
    # The copy brings the primary's log and pid-less state; its own log starts fresh.
    (staging / "log").unlink(missing_ok=True)
    os.rename(staging, folder)
