"""The engine's layering, read from the source files' syntax trees (no import is run):

- the LLM layer (memory/llm) is I/O and prompt text: it imports no models, not even for
  type hints, and nothing it imports at run time (followed through memory/) does either;
- the engine (everything under memory/) imports nothing from the dashboard (curation);
- task modules (every ``*tasks.py`` under memory/) hold ``@task`` wrappers and the
  plumbing that queues them: no models of ours, no SQL, no loops, short functions, and
  every task hands its work to a service.

Each rule is also run on a small source that breaks it, so that a checker that stopped
seeing anything would fail here too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MEMORY = ROOT / "memory"

MODEL_MODULES = ("memory.models", "memory.search.models", "django.db")
DASHBOARD = ("curation",)
# A task or a queueing helper longer than this is doing the work itself.
MAX_TASK_STATEMENTS = 8


@dataclass(frozen=True)
class Import:
    module: str  # the dotted module, absolute; ``from a import b`` also yields ``a.b``
    line: int
    runtime: bool  # False inside ``if TYPE_CHECKING:``


def _matches(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(tree: ast.Module, *, module: str, is_package: bool = False) -> list[Import]:
    """Every import in ``tree`` (module level and inside functions), relative imports
    made absolute, ``importlib.import_module("literal")`` included."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found: list[Import] = []

    def visit(node: ast.AST, runtime: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, False)
            for child in node.orelse:
                visit(child, runtime)
            return
        if isinstance(node, ast.Import):
            found.extend(Import(alias.name, node.lineno, runtime) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            source = ".".join([*base, *([node.module] if node.module else [])])
            found.append(Import(source, node.lineno, runtime))
            found.extend(
                Import(f"{source}.{alias.name}", node.lineno, runtime) for alias in node.names
            )
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append(Import(node.args[0].value, node.lineno, runtime))
        for inner in ast.iter_child_nodes(node):
            visit(inner, runtime)

    visit(tree, True)
    return found


@dataclass(frozen=True)
class Source:
    path: Path
    module: str
    tree: ast.Module

    @property
    def imports(self) -> list[Import]:
        return imports_of(self.tree, module=self.module, is_package=self.path.name == "__init__.py")


def _sources(folder: Path, pattern: str = "*.py") -> Iterator[Source]:
    for path in sorted(folder.rglob(pattern)):
        if ".venv" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        yield Source(path, _module_name(path), tree)


def _project_file(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


# --- the rules --------------------------------------------------------------------------


def forbidden_imports(
    source: Source, prefixes: tuple[str, ...], *, typing_too: bool = True
) -> list[str]:
    """One problem per import statement of a module under ``prefixes``."""
    lines: dict[int, str] = {}
    for imp in source.imports:
        if _matches(imp.module, prefixes) and (typing_too or imp.runtime):
            lines.setdefault(imp.line, f"{source.module}:{imp.line} imports {imp.module}")
    return list(lines.values())


def llm_violations(llm_sources: list[Source]) -> list[str]:
    """Models imported by the LLM layer, directly (type hints included) or by any module of
    memory/ it reaches through run-time imports."""
    problems = [p for s in llm_sources for p in forbidden_imports(s, MODEL_MODULES)]
    seen = {s.module for s in llm_sources}
    queue = list(llm_sources)
    while queue:
        source = queue.pop()
        for imp in source.imports:
            if not imp.runtime or not _matches(imp.module, ("memory",)) or imp.module in seen:
                continue
            path = _project_file(imp.module)
            if path is None:  # a name imported from a module, not a module
                continue
            seen.add(imp.module)
            tree = ast.parse(path.read_text(encoding="utf-8"))
            reached = Source(path, imp.module, tree)
            problems += [
                f"{p} (reached from memory/llm through {source.module})"
                for p in forbidden_imports(reached, MODEL_MODULES, typing_too=False)
            ]
            queue.append(reached)
    return problems


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of a function body at every depth, without its docstring, imports
    and ``pass``."""
    for index, stmt in enumerate(body):
        if index == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        if isinstance(stmt, ast.Import | ast.ImportFrom | ast.Pass):
            continue
        yield stmt
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list):
                nested = [s.body if isinstance(s, ast.ExceptHandler) else [s] for s in inner]
                yield from _statements([s for group in nested for s in group])


def _is_task(function: ast.FunctionDef) -> bool:
    for decorator in function.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Name | ast.Attribute) and (
            getattr(target, "id", None) == "task" or getattr(target, "attr", None) == "task"
        ):
            return True
    return False


def _names_from(nodes: list[ast.stmt] | ast.Module, prefixes: tuple[str, ...]) -> set[str]:
    """Names bound by ``from <prefix…> import name`` among ``nodes`` (not nested defs)."""
    statements = nodes.body if isinstance(nodes, ast.Module) else nodes
    names: set[str] = set()
    for stmt in statements:
        if isinstance(stmt, ast.ImportFrom) and stmt.module and _matches(stmt.module, prefixes):
            names |= {alias.asname or alias.name for alias in stmt.names}
    return names


def task_module_violations(source: Source) -> tuple[list[str], int]:
    """What a task module does beyond wrapping services, and how many tasks it holds."""
    where = source.module
    problems = forbidden_imports(source, ("memory.models", "memory.search.models", *DASHBOARD))
    problems += [
        f"{where}:{imp.line} imports {imp.module} (SQL and models belong to services)"
        for imp in source.imports
        if _matches(imp.module, ("django.db",))
        and imp.module not in ("django.db", "django.db.transaction")
    ]
    queue_models = _names_from(source.tree, ("django_tasks_db",))
    services = _names_from(source.tree, ("memory.services",))
    tasks = 0
    for node in source.tree.body:
        if isinstance(node, ast.ClassDef):
            if not any(getattr(base, "id", "").endswith("Exception") for base in node.bases):
                problems.append(f"{where}:{node.lineno} class {node.name} is not an exception")
            continue
        if not isinstance(node, ast.FunctionDef):
            continue
        name = f"{where}.{node.name}"
        statements = list(_statements(node.body))
        if len(statements) > MAX_TASK_STATEMENTS:
            problems.append(f"{name} has {len(statements)} statements")
        local_queue_models = queue_models | _names_from(node.body, ("django_tasks_db",))
        for inner in ast.walk(node):
            loops = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp)
            if isinstance(inner, (*loops, ast.GeneratorExp)):
                problems.append(f"{name}:{inner.lineno} loops (work for a service)")
            if isinstance(inner, ast.Attribute) and inner.attr == "objects":
                owner = inner.value.id if isinstance(inner.value, ast.Name) else "?"
                if owner not in local_queue_models:  # the queue's own table may be read
                    problems.append(f"{name}:{inner.lineno} queries {owner}.objects")
        if _is_task(node):
            tasks += 1
            callable_services = services | _names_from(node.body, ("memory.services",))
            calls = {
                c.func.id
                for c in ast.walk(node)
                if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
            }
            if not calls & callable_services:
                problems.append(f"{name} is a task that calls no memory.services function")
    return problems, tasks


# --- the tests --------------------------------------------------------------------------


def test_the_llm_layer_imports_no_models() -> None:
    sources = list(_sources(MEMORY / "llm"))
    assert {s.module for s in sources} >= {"memory.llm.client", "memory.llm.prompt"}
    assert llm_violations(sources) == []


def test_the_engine_imports_nothing_from_the_dashboard() -> None:
    sources = list(_sources(MEMORY))
    assert len(sources) > 150  # every module of the engine, migrations included
    assert [p for s in sources for p in forbidden_imports(s, DASHBOARD)] == []


def test_task_modules_hold_only_thin_wrappers_around_services() -> None:
    modules = list(_sources(MEMORY, "*tasks.py"))
    assert {s.module for s in modules} >= {"memory.tasks", "memory.search.tasks"}
    problems: list[str] = []
    tasks = 0
    for source in modules:
        found, count = task_module_violations(source)
        problems += found
        tasks += count
    assert tasks >= 4  # ingest runs, import jobs, duplicate scans, embedding drains
    assert problems == []


def _source(text: str, module: str) -> Source:
    return Source(MEMORY / "example.py", module, ast.parse(text))


def test_the_rules_catch_what_they_forbid() -> None:
    llm = _source(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from memory.models import Fact\n"
        "def f():\n    from ..search import models\n",
        "memory.llm.example",
    )
    problems = llm_violations([llm])
    assert "memory.llm.example:3 imports memory.models" in problems  # a type hint's import
    assert "memory.llm.example:5 imports memory.search.models" in problems  # a relative one
    reaching = _source("from memory.services import facts\n", "memory.llm.example")
    assert any("reached from memory/llm" in p for p in llm_violations([reaching]))
    engine = _source(
        "import importlib\nfrom curation.views import x\n"
        "def f():\n    importlib.import_module('curation.forms')\n",
        "memory.services.example",
    )
    assert len(forbidden_imports(engine, DASHBOARD)) == 2  # the import and the call
    fat_task = _source(
        "from django.db import connection\nfrom django_tasks import task\n"
        "@task()\ndef reindex(ids):\n"
        "    from memory.models import Fact\n"
        "    for fact in Fact.objects.filter(pk__in=ids):\n        fact.save()\n"
        "class Helper:\n    pass\n",
        "memory.example_tasks",
    )
    found, tasks = task_module_violations(fat_task)
    assert tasks == 1
    assert len(found) == 6, found  # model, SQL, loop, query, no service, class
    thin_task = _source(
        "from django_tasks import task\n"
        "@task()\ndef reindex(ids):\n"
        "    from memory.services.facts import facts_reindex\n    return facts_reindex(ids)\n",
        "memory.example_tasks",
    )
    assert task_module_violations(thin_task) == ([], 1)
