"""The embedded PostgreSQL starts again after any kill, and keeps every committed row.

Each test drives memory/infra/embedded_db.py from separate Python processes (as the demo,
manage.py commands and gunicorn workers use it) on a data folder of its own, kills them
(and the server) with SIGKILL at random points of start-up and shutdown, plants the
left-overs a kill can leave, and then checks that the next process starts the server and
finds every row a killed process reported as committed.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from django.conf import settings

from memory.infra.embedded_db import stop_server

# A small server: the test starts it dozens of times.
WORKER = r"""
import sys, json
from pathlib import Path
from memory.infra.embedded_db import embedded_database_url
import psycopg

pgdata, action, value = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
url = embedded_database_url(pgdata, tuning={"shared_buffers": "16MB", "max_connections": "20"})
print("joined", flush=True)
with psycopg.connect(url, autocommit=True) as conn:
    conn.execute("CREATE TABLE IF NOT EXISTS marks (id integer PRIMARY KEY)")
    if action == "insert":
        conn.execute("INSERT INTO marks VALUES (%s) ON CONFLICT DO NOTHING", [value])
        print("committed", value, flush=True)
    elif action == "list":
        ids = sorted(row[0] for row in conn.execute("SELECT id FROM marks"))
        print(json.dumps(ids), flush=True)
    elif action == "hold":
        print("holding", flush=True)
        sys.stdin.read()  # until the test kills this process
"""

SEED = int(os.environ.get("EMBEDDED_DB_KILL_SEED", "20261201"))


@pytest.fixture
def pgdata() -> Iterator[Path]:
    # Short and outside the work tree: the socket lives in the data folder.
    folder = Path(tempfile.mkdtemp(prefix="mdk-", dir="/tmp")) / "pgdata"
    yield folder
    stop_server(folder) if folder.exists() else None
    for process in psutil.process_iter(["name", "cwd"]):
        if process.info["name"] == "postgres" and process.info["cwd"] == str(folder):
            process.kill()
    subprocess.run(["rm", "-rf", str(folder.parent)], check=False)


def _spawn(pgdata: Path, action: str, value: int = 0) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, str(pgdata), action, str(value)],
        cwd=settings.BASE_DIR,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(settings.BASE_DIR)},
    )


def _finish(worker: subprocess.Popen[str], timeout: float = 120) -> str:
    out, err = worker.communicate(timeout=timeout)
    assert worker.returncode == 0, f"worker failed ({worker.returncode}):\n{err}"
    return out


def _rows(pgdata: Path) -> list[int]:
    out = _finish(_spawn(pgdata, "list"))
    return list(json.loads(out.strip().splitlines()[-1]))


def _insert(pgdata: Path, value: int) -> None:
    assert f"committed {value}" in _finish(_spawn(pgdata, "insert", value))


def _postmaster_pid(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().splitlines()[0])


def _server_running(pgdata: Path) -> bool:
    return any(
        p.info["name"] == "postgres"
        and p.info["cwd"] == str(pgdata)
        and p.info["status"] != psutil.STATUS_ZOMBIE
        for p in psutil.process_iter(["name", "cwd", "status"])
    )


def _hold(pgdata: Path) -> subprocess.Popen[str]:
    holder = _spawn(pgdata, "hold")
    assert holder.stdout is not None
    for line in holder.stdout:
        if line.startswith("holding"):
            return holder
    raise AssertionError(f"holder did not start: {holder.stderr.read() if holder.stderr else ''}")


def test_the_last_process_to_leave_stops_the_server_and_a_held_one_keeps_it(
    pgdata: Path,
) -> None:
    _insert(pgdata, 1)
    assert not _server_running(pgdata)
    holder = _hold(pgdata)
    _insert(pgdata, 2)
    assert _server_running(pgdata), "a process still holds the server; it must keep running"
    holder.stdin.close()  # type: ignore[union-attr]
    assert holder.wait(timeout=60) == 0
    assert not _server_running(pgdata)
    assert _rows(pgdata) == [1, 2]


def test_a_truncated_pgserver_bookkeeping_file_does_not_stop_a_start(pgdata: Path) -> None:
    _insert(pgdata, 1)
    (pgdata / ".handle_pids.json").write_text("")  # what a kill mid-write left behind
    _insert(pgdata, 2)
    assert _rows(pgdata) == [1, 2]


def test_a_stale_pid_file_naming_an_unrelated_live_process_is_cleared(pgdata: Path) -> None:
    _insert(pgdata, 1)
    unrelated = subprocess.Popen(["sleep", "60"])
    try:
        lines = ["", str(pgdata), "0", "5432", str(pgdata), "", "0", "ready"]
        lines[0] = str(unrelated.pid)
        (pgdata / "postmaster.pid").write_text("\n".join(lines) + "\n")
        (pgdata / ".s.PGSQL.5432.lock").write_text(f"{unrelated.pid}\n")
        (pgdata / ".s.PGSQL.5432").write_text("")  # a socket file left by a dead server
        _insert(pgdata, 2)
        assert unrelated.poll() is None, "the unrelated process must be left alone"
    finally:
        unrelated.kill()
        unrelated.wait()
    assert _rows(pgdata) == [1, 2]


def test_a_garbled_pid_file_is_cleared(pgdata: Path) -> None:
    _insert(pgdata, 1)
    (pgdata / "postmaster.pid").write_text("12")  # truncated mid-write
    assert _rows(pgdata) == [1]


def test_a_server_left_running_by_a_killed_process_is_joined_and_later_stopped(
    pgdata: Path,
) -> None:
    holder = _hold(pgdata)
    _insert(pgdata, 1)
    holder.kill()
    holder.wait()
    assert _server_running(pgdata), "a killed client leaves the server running"
    _insert(pgdata, 2)  # joins that server, and as the last one out stops it
    assert not _server_running(pgdata)
    assert _rows(pgdata) == [1, 2]


def test_a_killed_postmaster_with_orphaned_backends_is_recovered(pgdata: Path) -> None:
    holder = _hold(pgdata)  # keeps a backend connected
    _insert(pgdata, 1)
    os.kill(_postmaster_pid(pgdata), signal.SIGKILL)
    holder.kill()
    holder.wait()
    _insert(pgdata, 2)
    assert _rows(pgdata) == [1, 2]


def test_a_half_made_data_folder_from_a_killed_initdb_is_redone(pgdata: Path) -> None:
    (pgdata.parent / f".{pgdata.name}.init-99999").mkdir()
    (pgdata.parent / f".{pgdata.name}.init-99999" / "PG_VERSION").write_text("16\n")
    pgdata.mkdir()
    (pgdata / ".handle_pids.json").write_text("[")
    _insert(pgdata, 1)
    assert _rows(pgdata) == [1]
    assert not (pgdata.parent / f".{pgdata.name}.init-99999").exists()


def test_a_data_folder_holding_unknown_files_is_refused_not_deleted(pgdata: Path) -> None:
    pgdata.mkdir()
    (pgdata / "notes.txt").write_text("a person's file")
    worker = _spawn(pgdata, "list")
    _, err = worker.communicate(timeout=60)
    assert worker.returncode != 0
    assert "holds no PostgreSQL cluster" in err
    assert (pgdata / "notes.txt").read_text() == "a person's file"


def test_random_kills_during_start_up_and_shutdown_lose_no_committed_row(pgdata: Path) -> None:
    """Rounds of one or two processes that join, insert and leave (stopping the server),
    each SIGKILLed at a random moment; now and then the postmaster too. Afterwards every
    row a process reported committed is there, and nothing else is."""
    rng = random.Random(SEED)
    _insert(pgdata, 0)  # initdb happens here, outside the timed kills
    committed: set[int] = {0}
    attempted: set[int] = {0}
    next_value = 1
    started = time.monotonic()
    for _round_number in range(14):
        workers = []
        for _ in range(rng.choice([1, 1, 2])):
            workers.append((next_value, _spawn(pgdata, "insert", next_value)))
            attempted.add(next_value)
            next_value += 1
        time.sleep(rng.uniform(0.0, 1.4))  # python start ~0.2 s, server start/stop ~0.3 s
        for _, worker in workers:
            worker.kill()
        if rng.random() < 0.3 and (pgdata / "postmaster.pid").exists():
            with contextlib.suppress(ProcessLookupError, ValueError, IndexError):
                os.kill(_postmaster_pid(pgdata), signal.SIGKILL)
        for value, worker in workers:
            out, _ = worker.communicate(timeout=60)
            if f"committed {value}" in out:
                committed.add(value)
    rows = set(_rows(pgdata))
    assert committed <= rows, f"seed {SEED}: lost committed rows {sorted(committed - rows)}"
    assert rows <= attempted
    assert not _server_running(pgdata), "the last process out stops the server"
    assert time.monotonic() - started < 90
