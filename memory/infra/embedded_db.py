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
- **Starting** reads ``postmaster.pid`` and believes it only if its pid is a live ``postgres``
  process working in this data folder. A starting or recovering server is waited for, a
  stopping one is waited out; otherwise left-overs are cleared — backends orphaned by a killed
  postmaster (they would hold the shared memory and stop a new postmaster), a stale
  ``postmaster.pid`` (its pid may since belong to an unrelated process, which makes
  PostgreSQL refuse to start) and a stale socket and socket lock file — and the server is
  started detached, so killing the process that started it does not take it down.
  PostgreSQL's own crash recovery (WAL replay) keeps every committed transaction.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.parse import quote

DATABASE_NAME = "memorydesk"
SOCKET_NAME = ".s.PGSQL.5432"
# Written into the data folder and included from postgresql.conf, so the settings apply
# from the first start (no restart) and a person can read them in one place.
TUNING_FILE = "memorydesk.conf"
# pgserver's old bookkeeping file; nothing reads it now, and a truncated one is removed.
LEGACY_HANDLES_FILE = ".handle_pids.json"
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 60.0
# PostgreSQL refuses to run as root: pgserver's convention is a system user of this name.
ROOT_RUN_AS = "pgserver"

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


class EmbeddedDatabaseError(RuntimeError):
    """The embedded server could not be started; the message says why and where to look."""


@dataclass(frozen=True)
class Postmaster:
    """What ``postmaster.pid`` says about a server (its first, fifth and eighth lines)."""

    pid: int
    socket_dir: Path | None
    status: str  # "starting", "ready", "stopping", "standby" or "" (not written yet)


def embedded_database_url(pgdata: Path, *, tuning: Mapping[str, str] = TUNING) -> str:
    """Start (or join) the embedded server and return a URL for the project database.

    The calling process holds a share of the server until it exits; the last one to
    leave stops it."""
    pgdata = pgdata.expanduser().resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    # pgserver's import asks platformdirs for a runtime folder, which warns when unset.
    os.environ.setdefault("XDG_RUNTIME_DIR", str(pgdata.parent / "run"))
    Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(parents=True, exist_ok=True, mode=0o700)
    with _exclusive(_sibling(pgdata, ".lock")):
        _ensure_initialised(pgdata)
        _write_tuning(pgdata, tuning)
        postmaster = _ensure_running(pgdata)
        socket_dir = postmaster.socket_dir or pgdata
        _ensure_database(socket_dir)
        _join(pgdata)
    return _url(socket_dir)


def stop_server(pgdata: Path) -> bool:
    """Stop the server if it runs (a fast shutdown: sessions end, committed work stays).
    Returns whether one was running. For tests and tools; processes normally leave."""
    pgdata = pgdata.expanduser().resolve()
    with _exclusive(_sibling(pgdata, ".lock")):
        if _live_postmaster(pgdata) is None:
            return False
        _stop(pgdata)
        return True


# --- locks and handles --------------------------------------------------------------


def _sibling(pgdata: Path, suffix: str) -> Path:
    return pgdata.with_name(pgdata.name + suffix)


@contextlib.contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


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
    handle = _sibling(pgdata, ".handles").open("a")
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
        with _exclusive(_sibling(share.pgdata, ".lock")):
            try:
                # Converting a shared flock to an exclusive one is not atomic (the share is
                # dropped first), which is harmless here: this process is leaving anyway.
                fcntl.flock(share.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # another live process still uses the server
            if _live_postmaster(share.pgdata) is not None:
                _stop(share.pgdata)
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


def _bin(name: str) -> str:
    from pgserver._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / name)


def _run_as() -> str | None:
    """The system user PostgreSQL runs as: ourselves, or ``pgserver`` when we are root."""
    if os.geteuid() != 0:
        return None
    from pgserver.utils import ensure_user_exists

    ensure_user_exists(ROOT_RUN_AS)
    return ROOT_RUN_AS


def _give_to_server_user(path: Path) -> None:
    user = _run_as()
    if user is None:
        return
    import pwd

    from pgserver._commands import POSTGRES_BIN_PATH
    from pgserver.utils import ensure_prefix_permissions

    entry = pwd.getpwnam(user)
    ensure_prefix_permissions(path)
    ensure_prefix_permissions(POSTGRES_BIN_PATH)
    os.chown(path, entry.pw_uid, entry.pw_gid)


def _ensure_initialised(pgdata: Path) -> None:
    for half_made in pgdata.parent.glob(f".{pgdata.name}.init-*"):
        logger.warning("removing %s, left by an initdb that did not finish", half_made)
        shutil.rmtree(half_made, ignore_errors=True)
    if (pgdata / "PG_VERSION").exists() and (pgdata / "global" / "pg_control").exists():
        (pgdata / LEGACY_HANDLES_FILE).unlink(missing_ok=True)
        return
    if pgdata.exists():
        _remove_empty_folder(pgdata)
    staging = pgdata.parent / f".{pgdata.name}.init-{os.getpid()}"
    staging.mkdir(mode=0o700)
    _give_to_server_user(staging)
    logger.info("initialising the embedded PostgreSQL in %s", pgdata)
    _run(
        [
            _bin("initdb"),
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


def _remove_empty_folder(pgdata: Path) -> None:
    """A data folder without a cluster in it holds nothing of value only if it holds no
    more than an old pgserver's left-overs; anything else is a person's, and is kept."""
    leftovers = {LEGACY_HANDLES_FILE, "log"}
    contents = {child.name for child in pgdata.iterdir()}
    if not contents <= leftovers:
        raise EmbeddedDatabaseError(
            f"{pgdata} exists but holds no PostgreSQL cluster (no PG_VERSION or "
            f"global/pg_control) and has other files in it: {sorted(contents)[:8]}. "
            "Move it away and start again."
        )
    shutil.rmtree(pgdata)


def _write_tuning(pgdata: Path, tuning: Mapping[str, str]) -> None:
    """Keep TUNING in its own file, included from postgresql.conf. A change applies at the
    server's next start (shared_buffers and max_connections need one anyway)."""
    conf = pgdata / "postgresql.conf"
    include = f"include_if_exists = '{TUNING_FILE}'"
    current = conf.read_text()
    if include not in current:
        _replace_file(
            conf, f"{current}\n# Memory Desk's settings (memory/infra/embedded_db.py)\n{include}\n"
        )
    text = "".join(f"{name} = '{value}'\n" for name, value in tuning.items())
    target = pgdata / TUNING_FILE
    if target.exists() and target.read_text() == text:
        return
    _replace_file(target, text)


def _replace_file(target: Path, text: str) -> None:
    """Write by rename, so a kill leaves the old file or the new one, never half of one."""
    staging = target.with_name(target.name + ".tmp")
    staging.write_text(text)
    staging.chmod(0o644)
    os.replace(staging, target)


# --- the server ---------------------------------------------------------------------


def _read_postmaster_file(pgdata: Path) -> Postmaster | None:
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
        pid = int(lines[0])
    except (FileNotFoundError, IndexError, ValueError):
        return None
    socket_dir = Path(lines[4]) if len(lines) > 4 and lines[4].strip() else None
    status = lines[7].strip() if len(lines) > 7 else ""
    return Postmaster(pid=pid, socket_dir=socket_dir, status=status)


def _postgres_processes(pgdata: Path) -> list[object]:
    """Every live ``postgres`` process working in this data folder (each one chdirs there)."""
    import psutil

    found = []
    for process in psutil.process_iter(["name", "cwd", "status"]):
        info = process.info
        if info["name"] != "postgres" or info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if info["cwd"] and Path(info["cwd"]) == pgdata:
            found.append(process)
    return found


def _live_postmaster(pgdata: Path) -> Postmaster | None:
    postmaster = _read_postmaster_file(pgdata)
    if postmaster is None:
        return None
    import psutil

    try:
        process = psutil.Process(postmaster.pid)
        alive = (
            process.name() == "postgres"
            and process.status() != psutil.STATUS_ZOMBIE
            and Path(process.cwd()) == pgdata
        )
    except (psutil.NoSuchProcess, psutil.AccessDenied, FileNotFoundError):
        alive = False
    return postmaster if alive else None


def _accepts_connections(socket_dir: Path) -> bool:
    import psycopg

    try:
        with psycopg.connect(
            host=str(socket_dir), user="postgres", dbname="postgres", connect_timeout=3
        ):
            return True
    except psycopg.OperationalError:
        return False


def _ensure_running(pgdata: Path, *, ready: tuple[str, ...] = ("ready",)) -> Postmaster:
    """Join a ready server, wait for one starting or stopping, or start one. A hot standby
    says ``standby`` where a primary says ``ready``."""
    deadline = time.monotonic() + START_TIMEOUT_S
    attempts = 0
    started_at = -1e9
    while time.monotonic() < deadline:
        postmaster = _live_postmaster(pgdata)
        if postmaster is not None:
            socket_dir = postmaster.socket_dir or pgdata
            if postmaster.status in ready and _accepts_connections(socket_dir):
                return postmaster
            # Starting (perhaps replaying WAL after a crash) or stopping (a process that
            # began a shutdown was killed; the server finishes it): wait and look again.
            time.sleep(0.1)
            continue
        if time.monotonic() - started_at < 10 and _postgres_processes(pgdata):
            time.sleep(0.1)  # the postmaster we launched has not written its pid file yet
            continue
        if attempts == 3:
            break
        _clear_leftovers(pgdata)
        _start(pgdata)
        attempts += 1
        started_at = time.monotonic()
        time.sleep(0.1)
    raise EmbeddedDatabaseError(
        f"the embedded PostgreSQL in {pgdata} did not become ready (started {attempts} "
        f"times in {START_TIMEOUT_S:.0f} s); its log ({pgdata / 'log'}) ends with:\n"
        f"{_log_tail(pgdata)}"
    )


def _clear_leftovers(pgdata: Path) -> None:
    """With no live postmaster: end its orphaned backends and remove its stale files."""
    import psutil

    orphans = _postgres_processes(pgdata)
    for process in orphans:
        logger.warning("ending PostgreSQL process %s left by a postmaster that died", process.pid)  # type: ignore[attr-defined]
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()  # type: ignore[attr-defined]
    psutil.wait_procs(orphans, timeout=10)  # type: ignore[arg-type]
    stale = _read_postmaster_file(pgdata)
    if (pgdata / "postmaster.pid").exists():
        logger.warning("removing a stale postmaster.pid in %s", pgdata)
        (pgdata / "postmaster.pid").unlink(missing_ok=True)
    for socket_dir in {
        pgdata,
        _socket_dir(pgdata),
        *([stale.socket_dir] if stale and stale.socket_dir else []),
    }:
        (socket_dir / SOCKET_NAME).unlink(missing_ok=True)
        (socket_dir / f"{SOCKET_NAME}.lock").unlink(missing_ok=True)


def _socket_dir(pgdata: Path) -> Path:
    """The data folder, unless its socket path would pass the 107-byte limit of a Unix
    socket name; then a short folder of its own under the temp directory."""
    if len(str(pgdata / SOCKET_NAME).encode()) < 100:
        return pgdata
    digest = hashlib.sha256(f"{pgdata}-{pgdata.stat().st_ino}".encode()).hexdigest()[:12]
    folder = Path(tempfile.gettempdir()) / f"memorydesk-pg-{digest}"
    folder.mkdir(mode=0o700, exist_ok=True)
    _give_to_server_user(folder)
    return folder


def _start(pgdata: Path) -> None:
    socket_dir = _socket_dir(pgdata)
    logger.info("starting the embedded PostgreSQL in %s", pgdata)
    # -W: do not wait (we poll postmaster.pid ourselves, so a kill of this process during
    # the wait changes nothing); the postmaster is detached from this process's session.
    _run(
        [
            _bin("pg_ctl"),
            "-D",
            str(pgdata),
            "-W",
            "-l",
            str(pgdata / "log"),
            "-o",
            f'-h "" -k "{socket_dir}"',
            "start",
        ],
        timeout=30,
    )


def _stop(pgdata: Path) -> None:
    postmaster = _live_postmaster(pgdata)
    if postmaster is None:
        return
    logger.debug("stopping the embedded PostgreSQL in %s", pgdata)
    # A fast shutdown: open sessions are ended, every committed transaction stays. Sent as
    # a signal (what pg_ctl does) so nothing is left half-done if this process dies now.
    with contextlib.suppress(ProcessLookupError):
        os.kill(postmaster.pid, signal.SIGINT)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        if _live_postmaster(pgdata) is None:
            return
        time.sleep(0.05)
    logger.warning(
        "the embedded PostgreSQL did not stop in %.0f s; stopping it immediately", STOP_TIMEOUT_S
    )
    with contextlib.suppress(ProcessLookupError):
        os.kill(postmaster.pid, signal.SIGQUIT)  # immediate: WAL replay on the next start


def _run(command: list[str], *, timeout: float) -> None:
    try:
        subprocess.run(
            command,
            check=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
            user=_run_as(),
            start_new_session=True,
        )
    except subprocess.CalledProcessError as error:
        output = error.stdout.decode(errors="replace") if error.stdout else ""
        raise EmbeddedDatabaseError(
            f"{Path(command[0]).name} failed ({error.returncode}): {output.strip()}"
        ) from error


def _log_tail(pgdata: Path, lines: int = 15) -> str:
    try:
        return "\n".join((pgdata / "log").read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


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


# --- streaming replicas -------------------------------------------------------------

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
    postmaster = _live_postmaster(primary)
    if postmaster is None:
        raise EmbeddedDatabaseError(f"the embedded primary in {primary} is not running")
    folder.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(_sibling(folder, ".lock")):
        if not _is_cluster(folder):
            _base_backup(postmaster.socket_dir or primary, folder)
        _write_tuning(folder, REPLICA_TUNING)
        standby = _ensure_running(folder, ready=("standby", "ready"))
    return _url(standby.socket_dir or folder)


def replica_stop(folder: Path, *, remove: bool = False) -> bool:
    """Stop the standby in ``folder`` (fast shutdown); ``remove`` also deletes its data.
    Returns whether it was running."""
    folder = folder.expanduser().resolve()
    if not folder.exists():
        return False
    with _exclusive(_sibling(folder, ".lock")):
        running = _live_postmaster(folder) is not None
        if running:
            _stop(folder)
        if remove:
            _clear_leftovers(folder)
            shutil.rmtree(folder, ignore_errors=True)
    if remove:
        _sibling(folder, ".lock").unlink(missing_ok=True)
    return running


def replica_status(folder: Path) -> ReplicaStatus:
    folder = folder.expanduser().resolve()
    postmaster = _live_postmaster(folder) if _is_cluster(folder) else None
    url = _url(postmaster.socket_dir or folder) if postmaster else None
    return ReplicaStatus(folder=folder, running=postmaster is not None, url=url)


def _is_cluster(pgdata: Path) -> bool:
    return (pgdata / "PG_VERSION").exists() and (pgdata / "global" / "pg_control").exists()


def _url(socket_dir: Path) -> str:
    return f"postgresql://postgres@/{DATABASE_NAME}?host={quote(str(socket_dir), safe='')}"


def _base_backup(primary_socket_dir: Path, folder: Path) -> None:
    """Copy the primary into a staging sibling and rename it into place, so a killed
    backup never leaves half a cluster where a standby is expected."""
    for half_made in folder.parent.glob(f".{folder.name}.init-*"):
        shutil.rmtree(half_made, ignore_errors=True)
    if folder.exists():
        _remove_empty_folder(folder)
    staging = folder.parent / f".{folder.name}.init-{os.getpid()}"
    staging.mkdir(mode=0o700)
    _give_to_server_user(staging)
    logger.info("copying the embedded primary into %s (pg_basebackup)", folder)
    _run(
        [
            _bin("pg_basebackup"),
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
