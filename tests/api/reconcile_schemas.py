"""The reconciliation service's contract as JSON Schemas: the project's own, in
``reconciliation_schemas/<version>/`` beside this file, written from the W3C Entity
Reconciliation Community Group's specification (0.2 and 1.0-draft) for what the service
reads and answers.

Where the community group's published schemas happen to lie next to the checkout
(``shared/reference/reconciliation`` beside the clone or one of its ancestors, or under
``MEMORY_SHARED_DIR``), every document is checked against them as well. They are an extra
check, never a requirement: without them the project's own schemas decide.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator, Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7, DRAFT202012

OWN = Path(__file__).resolve().parent / "reconciliation_schemas"
VERSIONS = ("0.2", "1.0-draft")
# The project's schema names, and the files of the published schemas for the same documents.
PUBLISHED = {
    "manifest": "manifest.json",
    "query-batch": "reconciliation-query-batch.json",
    "result-batch": "reconciliation-result-batch.json",
    "suggest-entities": "suggest-entities-response.json",
    "suggest-types": "suggest-types-response.json",
    "suggest-properties": "suggest-properties-response.json",
    "extend-query": "data-extension-query.json",
    "extend-response": "data-extension-response.json",
    "extend-proposal": "data-extension-property-proposal.json",
}
REPO_ROOT = Path(__file__).resolve().parents[2]
RELATIVE = Path("reference") / "reconciliation"


@cache
def own_schemas(version: str) -> tuple[Registry, dict[str, dict[str, Any]]]:
    """The project's schemas of ``version`` by name, and a registry resolving their
    references to one another (by ``$id``)."""
    schemas = {p.stem: json.loads(p.read_text()) for p in sorted((OWN / version).glob("*.json"))}
    registry = Registry().with_resources(
        (schema["$id"], Resource.from_contents(schema, default_specification=DRAFT202012))
        for schema in schemas.values()
    )
    return registry, schemas


def published_dir() -> Path | None:
    """Where the published schemas lie, if anywhere near."""
    named = os.environ.get("MEMORY_SHARED_DIR")
    candidates = [Path(named)] if named else []
    candidates += [ancestor / "shared" for ancestor in REPO_ROOT.parents]
    for shared in candidates:
        if (shared / RELATIVE / "0.2" / "manifest.json").is_file():
            return shared / RELATIVE
    return None


@cache
def _published(version: str) -> tuple[Registry, dict[str, dict[str, Any]]] | None:
    folder = published_dir()
    if folder is None:
        return None
    schemas = {p.name: json.loads(p.read_text()) for p in sorted((folder / version).glob("*.json"))}
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


def validate_own(version: str, name: str, instance: Any) -> None:
    """Raise jsonschema's ValidationError when ``instance`` breaks the project's schema
    ``name`` of ``version``."""
    registry, schemas = own_schemas(version)
    Draft202012Validator(schemas[name], registry=registry).validate(instance)


def validate(version: str, name: str, instance: Any) -> None:
    """``validate_own``, and where the published schemas lie near, theirs as well."""
    validate_own(version, name, instance)
    published = _published(version)
    if published is not None:
        registry, files = published
        Draft7Validator(files[PUBLISHED[name]], registry=registry).validate(instance)
