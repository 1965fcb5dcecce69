"""The demo and the server need only the product's dependencies (``pip install -e .``); the
``[dev]`` extras are for the tests, linters and benchmarks.

Every distribution that only ``[dev]`` brings in (its requirements' closure minus the
product's) is made unimportable in a fresh interpreter, which then loads what a server and
the demo load: the settings, every URL's view (REST, MCP, dashboard), the task module and
the ``demo`` command.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from django.conf import settings

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _closure(names: set[str]) -> set[str]:
    """The installed distributions ``names`` need, themselves included (markers ignored:
    a superset, which only makes the product's side larger and the blocked side smaller)."""
    seen: set[str] = set()
    queue = list(names)
    while queue:
        name = queue.pop()
        if name in seen:
            continue
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        queue += [_name(r) for r in requires if "extra ==" not in r]
    return seen


def _dev_only_modules() -> set[str]:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    product = {_name(r) for r in project["dependencies"]}
    dev = {_name(r) for r in project["optional-dependencies"]["dev"]}
    dev_only = _closure(dev) - _closure(product)
    modules = {
        module
        for module, distributions in metadata.packages_distributions().items()
        if {d.lower().replace("_", "-") for d in distributions} & dev_only
    }
    return modules


SCRIPT = r"""
import importlib.abc, json, sys

BLOCKED = set(json.loads(sys.argv[1]))


class DevOnly(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} comes with the [dev] extras only")
        return None


sys.meta_path.insert(0, DevOnly())

import django

django.setup()
from django.core.management import load_command_class
from django.urls import get_resolver

import memory.tasks  # the worker's tasks


def views(patterns):
    for pattern in patterns:
        if hasattr(pattern, "url_patterns"):
            yield from views(pattern.url_patterns)
        else:
            yield pattern.callback


count = sum(1 for _ in views(get_resolver().url_patterns))
load_command_class("memory", "demo")
loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
print(json.dumps({"views": count, "loaded": loaded}))
"""


def test_the_server_and_the_demo_import_nothing_from_the_dev_extras() -> None:
    blocked = _dev_only_modules()
    assert {"pytest", "playwright", "bm25s", "importlinter"} <= blocked  # the check sees them
    assert "sklearn" not in blocked  # sentence-transformers needs it: a product dependency
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(sorted(blocked))],
        cwd=settings.BASE_DIR,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "memory.settings"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["views"] > 50
    assert report["loaded"] == []
