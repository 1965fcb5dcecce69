"""One PostgreSQL server over a data folder, run from pgserver's binaries: reading
``postmaster.pid``, starting the server detached, waiting until it is ready, clearing
what a killed one left, stopping it; and the data folder's own files (the tuning file,
a folder that holds no cluster).

**Starting** reads ``postmaster.pid`` and believes it only if its pid is a live ``postgres``
process working in this data folder. A starting or recovering server is waited for, a
stopping one is waited out; otherwise left-overs are cleared — backends orphaned by a killed
postmaster (they would hold the shared memory and stop a new postmaster), a stale
``postmaster.pid`` (its pid may since belong to an unrelated process, which makes
PostgreSQL refuse to start) and a stale socket and socket lock file — and the server is
started detached, so killing the process that started it does not take it down.
PostgreSQL's own crash recovery (WAL replay) keeps every committed transaction.
"""

from __future__ import annotations

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

logger = logging.getLogger(__name__)


class EmbeddedDatabaseError(RuntimeError):
    """The embedded server could not be started; the message says why and where to look."""


@dataclass(frozen=True)
class Postmaster:
    """What ``postmaster.pid`` says about a server (its first, fifth and eighth lines)."""

    pid: int
    socket_dir: Path | None
    status: str  # "starting", "ready", "stopping", "standby" or "" (not written yet)


def sibling_path(pgdata: Path, suffix: str) -> Path:
    return pgdata.with_name(pgdata.name + suffix)


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def server_binary(name: str) -> str:
    from pgserver._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / name)


def _run_as() -> str | None:
    """The system user PostgreSQL runs as: ourselves, or ``pgserver`` when we are root."""
    if os.geteuid() != 0:
        return None
    from pgserver.utils import ensure_user_exists

    ensure_user_exists(ROOT_RUN_AS)
    return ROOT_RUN_AS


def give_to_server_user(path: Path) -> None:
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


def remove_empty_folder(pgdata: Path) -> None:
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


def write_tuning(pgdata: Path, tuning: Mapping[str, str]) -> None:
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


def live_postmaster(pgdata: Path) -> Postmaster | None:
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


def ensure_running(pgdata: Path, *, ready: tuple[str, ...] = ("ready",)) -> Postmaster:
    """Join a ready server, wait for one starting or stopping, or start one. A hot standby
    says ``standby`` where a primary says ``ready``."""
    deadline = time.monotonic() + START_TIMEOUT_S
    attempts = 0
    started_at = -1e9
    while time.monotonic() < deadline:
        postmaster = live_postmaster(pgdata)
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
        clear_leftovers(pgdata)
        _start(pgdata)
        attempts += 1
        started_at = time.monotonic()
        time.sleep(0.1)
    raise EmbeddedDatabaseError(
        f"the embedded PostgreSQL in {pgdata} did not become ready (started {attempts} "
        f"times in {START_TIMEOUT_S:.0f} s); its log ({pgdata / 'log'}) ends with:\n"
        f"{_log_tail(pgdata)}"
    )


def clear_leftovers(pgdata: Path) -> None:
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
    give_to_server_user(folder)
    return folder


def _start(pgdata: Path) -> None:
    socket_dir = _socket_dir(pgdata)
    logger.info("starting the embedded PostgreSQL in %s", pgdata)
    # -W: do not wait (we poll postmaster.pid ourselves, so a kill of this process during
    # the wait changes nothing); the postmaster is detached from this process's session.
    run_tool(
        [
            server_binary("pg_ctl"),
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


def server_stop(pgdata: Path) -> None:
    postmaster = live_postmaster(pgdata)
    if postmaster is None:
        return
    logger.debug("stopping the embedded PostgreSQL in %s", pgdata)
    # A fast shutdown: open sessions are ended, every committed transaction stays. Sent as
    # a signal (what pg_ctl does) so nothing is left half-done if this process dies now.
    with contextlib.suppress(ProcessLookupError):
        os.kill(postmaster.pid, signal.SIGINT)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        if live_postmaster(pgdata) is None:
            return
        time.sleep(0.05)
    logger.warning(
        "the embedded PostgreSQL did not stop in %.0f s; stopping it immediately", STOP_TIMEOUT_S
    )
    with contextlib.suppress(ProcessLookupError):
        os.kill(postmaster.pid, signal.SIGQUIT)  # immediate: WAL replay on the next start


def run_tool(command: list[str], *, timeout: float) -> None:
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


def is_cluster(pgdata: Path) -> bool:
    return (pgdata / "PG_VERSION").exists() and (pgdata / "global" / "pg_control").exists()


def socket_url(socket_dir: Path) -> str:
    return f"postgresql://postgres@/{DATABASE_NAME}?host={quote(str(socket_dir), safe='')}"
