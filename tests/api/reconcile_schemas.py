"""The W3C reconciliation JSON schemas, read where the project's shared reference lies.

They are not copied into the repository: ``shared/reference/reconciliation`` sits beside
the clone (``../shared`` of the repository root) or beside one of its ancestors (a
worktree one level further down). ``MEMORY_SHARED_DIR`` names it outright.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

REPO_ROOT = Path(__file__).resolve().parents[2]
RELATIVE = Path("reference") / "reconciliation"


def reconciliation_dir() -> Path:
    named = os.environ.get("MEMORY_SHARED_DIR")
    candidates = [Path(named)] if named else []
    candidates += [ancestor / "shared" for ancestor in REPO_ROOT.parents]
    for shared in candidates:
        if (shared / RELATIVE / "0.2" / "manifest.json").is_file():
            return shared / RELATIVE
    raise FileNotFoundError(
        "the reconciliation schemas are not found: put shared/ beside the clone "
        f"(looked in {', '.join(str(c) for c in candidates)}) or set MEMORY_SHARED_DIR"
    )


@cache
def _registry(version: str) -> tuple[Registry, dict[str, dict[str, Any]]]:
    folder = reconciliation_dir() / version
    schemas = {p.name: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}
    resources = []
    for name, schema in schemas.items():
        uri = schema.get("$id", "").rstrip("#")
        resource = Resource.from_contents(schema, default_specification=DRAFT7)
        resources.append((uri, resource))
        # Relative references ("lang.json", "type.json") resolve against each schema's
        # own $id; the files are named as those references expect, except for the two
        # batch schemas whose $id differs from their file name.
        if name != "openapi.json":
            resources.append((uri.rsplit("/", 1)[0] + "/" + name, resource))
    return Registry().with_resources(resources), schemas


def validate(version: str, schema_file: str, instance: Any) -> None:
    """Raise jsonschema's ValidationError when ``instance`` breaks the schema."""
    registry, schemas = _registry(version)
    Draft7Validator(schemas[schema_file], registry=registry).validate(instance)
