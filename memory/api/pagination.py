from __future__ import annotations

from typing import Any

from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

from memory.kernel.errors import ValidationFailed


class StandardPagination(LimitOffsetPagination):
    """``?limit=&offset=`` with a cap, returning ``{count, next, previous, results}``.

    Unlike DRF's, a ``limit`` or ``offset`` that is not a number in range is refused with a
    400 rather than silently replaced by the default; a ``limit`` above the cap is capped.
    """

    default_limit = 50
    max_limit = 500

    def get_limit(self, request: Request) -> int:
        limit = _int_param(request, self.limit_query_param, minimum=1)
        return self.default_limit if limit is None else min(limit, self.max_limit)

    def get_offset(self, request: Request) -> int:
        return _int_param(request, self.offset_query_param, minimum=0) or 0

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        limit, offset = super().get_schema_operation_parameters(view)
        limit["schema"]["minimum"] = 1
        limit["description"] = (
            f"Number of results to return per page (default {self.default_limit}; "
            f"values above {self.max_limit} are capped)."
        )
        offset["schema"]["minimum"] = 0
        return [limit, offset]


def _int_param(request: Request, name: str, *, minimum: int) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise ValidationFailed(
            f"{name} must be an integer of at least {minimum}", code=f"invalid_{name}"
        )
    return value
