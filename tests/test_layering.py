"""The layering, as import-linter contracts (``[tool.importlinter]`` in pyproject.toml,
docs/decisions/0065, docs/ARCHITECTURE.md): entry points → faces and tasks → the web
plumbing → services and selectors → the engines (matching, search, the LLM layer) →
domain rules → models → infrastructure → kernel; the engine never imports the dashboard;
the LLM layer imports no models; task modules hand their work to services; no import
cycles between sibling packages. CI runs ``lint-imports`` too; this test keeps it in the
README's test command."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from django_tasks.base import Task

from memory.infra.queueing import TASK_PATHS, queued_task

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(cwd: Path, *, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(path)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_every_contract_is_kept() -> None:
    result = _lint_imports(ROOT, path=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 6 kept, 0 broken." in result.stdout, result.stdout


def _package(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


LAYOUT = (
    {
        f"{package}/__init__.py": ""
        for package in (
            "curation",
            "memory",
            "memory/api",
            "memory/mcp",
            "memory/management",
            "memory/services",
            "memory/selectors",
            "memory/search",
            "memory/llm",
            "memory/models",
            "memory/migrations",
            "memory/web",
            "memory/matching",
            "memory/domain",
            "memory/infra",
            "memory/kernel",
        )
    }
    | {
        f"memory/{entry}.py": ""
        for entry in ("urls", "wsgi", "asgi", "settings", "apps", "gunicorn_conf", "tasks")
    }
    | {
        "memory/search/models.py": "",
    }
)


def test_the_contracts_catch_what_they_forbid(tmp_path: Path) -> None:
    """The same contracts on a small tree that breaks each of them once."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    _package(
        tmp_path,
        LAYOUT
        | {
            # a service queues a task by importing it: services → tasks, and a cycle
            "memory/services/ingest/__init__.py": "",
            "memory/services/ingest/run.py": "from memory.tasks import ingest_run_task\n",
            "memory/tasks.py": "def f():\n    from memory.services import ingest\n",
            # the LLM layer reaches the models through a selector, for a type hint
            "memory/llm/prompt.py": "from memory.selectors import vocabulary\n",
            "memory/selectors/vocabulary.py": "from memory import models\n",
            # the engine imports the dashboard
            "memory/api/views.py": "import curation.forms\n",
            "curation/forms.py": "",
            # one face on another: MCP borrowing the API's module instead of memory.web
            "memory/mcp/view.py": "from memory.api import views\n",
            # infrastructure reaching up into a domain rule
            "memory/infra/pg.py": "from memory.domain import access\n",
            "memory/domain/access.py": "",
        },
    )
    result = _lint_imports(tmp_path, path=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    out = " ".join(result.stdout.split())
    assert "Contracts: 1 kept, 5 broken." in out, result.stdout
    assert "memory.services.ingest.run -> memory.tasks" in out
    assert "memory.llm.prompt -> memory.selectors.vocabulary" in out
    assert "memory.api.views -> curation.forms" in out
    assert "memory.mcp.view -> memory.api.views" in out
    assert "memory.infra.pg -> memory.domain.access" in out


def _layer_members() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c["type"] == "layers")
    return {name.strip() for layer in layers for name in re.split(r"[|:]", layer)}


def test_every_module_of_the_engine_sits_in_a_named_layer() -> None:
    """A new module at the root of ``memory/`` (or a new package) must be placed in a layer:
    nothing sits outside the contracts."""
    members = _layer_members()
    found = {
        f"memory.{path.stem if path.is_file() else path.name}"
        for path in (ROOT / "memory").iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file()
    }
    assert found - members == set()
    assert "curation" in members


@pytest.mark.parametrize("path", TASK_PATHS)
def test_every_task_a_service_queues_by_name_exists(path: str) -> None:
    task = queued_task(path)
    assert isinstance(task, Task)
    assert task.module_path == path  # what the queue records and the worker imports
