"""Whether a memory is accepted for ingest: the checks ``run_create`` makes before a Run
exists (the ``infer`` mode, the text's size, the source, the triples, a chat model for
the modes that need one). A refused memory leaves nothing stored. The caller's triples
are parsed here too, their errors located as the caller wrote them.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from pydantic import ValidationError

from memory.kernel.errors import ServiceUnavailable, ValidationFailed
from memory.llm.client import chat_model_configured
from memory.llm.schemas import TriplesInput

INFER_MODES: tuple[str, ...] = ("llm", "triples", "preview", "none")
MAX_SOURCE_CHARS = 300


class TextTooLarge(ValidationFailed):
    status = 413
    code = "text_too_large"


def ingest_input_check(
    *, text: str, infer: str, triples: dict[str, Any] | None, source: str
) -> None:
    """Refuse a memory that cannot be accepted (ValidationFailed, TextTooLarge,
    ServiceUnavailable); see ``run_create``."""
    if infer not in INFER_MODES:
        raise ValidationFailed(
            f"infer must be one of {', '.join(INFER_MODES)}", code="invalid_infer"
        )
    size = len(text.encode("utf-8"))
    limit = settings.MEMORY_MAX_TEXT_BYTES
    if size > limit:
        raise TextTooLarge(
            f"the text is {size} bytes; at most {limit} bytes are accepted per memory "
            "(split it into several turns, or raise MEMORY_MAX_TEXT_BYTES)",
            details={"bytes": size, "limit": limit},
        )
    if len(source) > MAX_SOURCE_CHARS:
        raise ValidationFailed(
            f"source can be at most {MAX_SOURCE_CHARS} characters", code="invalid_source"
        )
    if infer in ("llm", "none") and triples is not None:
        raise ValidationFailed(
            f"infer={infer} takes text only; send triples with infer=triples",
            code="unexpected_triples",
        )
    if infer == "triples" and triples is None:
        raise ValidationFailed("infer=triples needs triples", code="missing_triples")
    if triples is not None:
        triples_parse(triples)
    uses_model = infer == "llm" or (infer == "preview" and triples is None)
    if (infer == "none" or uses_model) and not text.strip():
        raise ValidationFailed(f"infer={infer} needs a non-empty text", code="missing_text")
    if uses_model and not chat_model_configured():
        raise ServiceUnavailable(
            "no chat model is configured, so infer=llm cannot run: set MEMORY_CHAT_MODEL "
            "(and OPENAI_BASE_URL / OPENAI_API_KEY), or send triples with infer=triples",
            code="chat_model_not_configured",
        )


def triples_parse(triples: Any) -> TriplesInput:
    """Validate a caller's triples (ValidationFailed "invalid_triples" with the errors)."""
    try:
        return TriplesInput.model_validate(triples)
    except ValidationError as exc:
        errors = [
            {"at": _triples_path(err["loc"]), "message": _triples_problem(err)}
            for err in exc.errors()[:20]
        ]
        raise ValidationFailed(
            f"triples are not valid: {errors[0]['at']}: {errors[0]['message']}"
            + (f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""),
            code="invalid_triples",
            details=errors,
        ) from None


def _triples_path(loc: tuple[int | str, ...]) -> str:
    """A JSON path as a caller writes it: ``relations[0].confidance``."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    return path or "triples"


def _triples_problem(err: Any) -> str:
    if err["type"] == "extra_forbidden":
        return "unknown field"
    return str(err["msg"])
