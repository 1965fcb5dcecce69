"""The model's half of an ingest run: the vocabulary it is shown, the prompt, the call,
and what the run records of it (prompt, raw and parsed output, tokens)."""

from __future__ import annotations

from typing import Any

from memory.domain.access import ContextAccess
from memory.domain.entity_names import EXTRACTION_TYPES
from memory.infra.embeddings import embed_texts
from memory.infra.stages import StageClock
from memory.llm.client import LLMError, chat_structured
from memory.llm.prompt import extraction_prompt_render
from memory.llm.schemas import ExtractionOutput
from memory.models import Run
from memory.selectors.predicates import registry_render_for_prompt
from memory.selectors.vocabulary import vocabulary_gather
from memory.services.ingest.entity_resolution import ResolutionPlan
from memory.services.registry.usage import vocabulary_usage_compact


def ingest_extract(
    *,
    access: ContextAccess,
    scope: str,
    text: str,
    visible: list[str],
    run: Run | None,
    clock: StageClock,
) -> ExtractionOutput:
    with clock.stage("vocabulary"):
        vocabulary_usage_compact(context=access.context, scopes=visible)
        vocabulary = vocabulary_gather(
            context=access.context,
            scope=scope,
            grants=access.grants,
            text=text,
            embed=lambda t: embed_texts([t])[0],
        )
        block = registry_render_for_prompt(context=access.context)
    prompt = extraction_prompt_render(
        vocabulary=vocabulary, registry_block=block, text=text, entity_types=EXTRACTION_TYPES
    )
    if run is not None:
        run.prompt = prompt.as_text()
        run.save(update_fields=["prompt"])
    with clock.stage("llm"):
        try:
            answer = chat_structured(
                messages=prompt.messages, model=ExtractionOutput, schema_name="memory_extraction"
            )
        except LLMError as exc:
            _record_llm(run, exc.calls, parsed=None)
            raise
    _record_llm(run, answer.calls, parsed=answer.value.model_dump(mode="json"))
    return answer.value


def _record_llm(run: Run | None, calls: list[Any], *, parsed: dict[str, Any] | None) -> None:
    if run is None:
        return
    outputs = [c.content for c in calls]
    run.raw_output = (
        outputs[0] if len(outputs) == 1 else "\n\n--- repair answer ---\n\n".join(outputs)
    )
    run.parsed_output = parsed
    run.prompt_tokens += sum(c.prompt_tokens for c in calls)
    run.completion_tokens += sum(c.completion_tokens for c in calls)
    run.save(update_fields=["raw_output", "parsed_output", "prompt_tokens", "completion_tokens"])


def ingest_record_calls(run: Run | None, plan: ResolutionPlan) -> None:
    """Tokens the entity judge spent count on the run too."""
    if run is None or not plan.llm_calls:
        return
    run.prompt_tokens += sum(c.prompt_tokens for c in plan.llm_calls)
    run.completion_tokens += sum(c.completion_tokens for c in plan.llm_calls)
    run.save(update_fields=["prompt_tokens", "completion_tokens"])
