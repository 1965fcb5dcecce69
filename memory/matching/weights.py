"""A context's fitted duplicate weights (``DuplicateModel``), read and saved.

The duplicate scan fits them; reconciliation and the incremental check read them.
"""

from __future__ import annotations

import json

from django.db import connection

from memory.matching.model import Model
from memory.models.duplicate import DuplicateModel

AUTO_FIT_UP_TO = 50_000  # above this many entities only the full scan re-estimates


def model_read(context_id: int) -> tuple[Model, int]:
    """The context's weights and how many entities they were estimated on."""
    row = DuplicateModel.objects.filter(context_id=context_id).only("params", "entities").first()
    return Model.from_json(row.params if row else None), (row.entities if row else 0)


def model_read_for_check(context_id: int) -> tuple[Model, int, int | None]:
    """``model_read``, and in the same statement the context's live entities as
    ``refit_if_grown`` counts them — None when the model is past AUTO_FIT_UP_TO (a CASE
    branch not taken: the count is not run)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT m.params::text, m.entities, CASE WHEN COALESCE(m.entities, 0) < %s THEN "
            "(SELECT count(*) FROM memory_entity e "
            "WHERE e.context_id = %s AND e.merged_into_id IS NULL) END "
            "FROM (SELECT 1) AS one "
            "LEFT JOIN memory_duplicatemodel m ON m.context_id = %s",
            [AUTO_FIT_UP_TO, context_id, context_id],
        )
        params, fitted_on, live = cursor.fetchone()
    model = Model.from_json(json.loads(params) if params is not None else None)
    return model, fitted_on or 0, live


def model_save(context_id: int, model: Model, entities: int) -> None:
    DuplicateModel.objects.update_or_create(
        context_id=context_id, defaults={"params": model.to_json(), "entities": entities}
    )
