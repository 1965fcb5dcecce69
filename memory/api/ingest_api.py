"""``memories``, ``runs`` and ``vocabulary`` under /api/v1/contexts/{ctx}/."""

from __future__ import annotations

import json
from typing import Any

from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory.api.common import (
    ErrorSerializer,
    access_for,
    paginated,
    query_params,
    represented,
)
from memory.api.fields import JsonInput, ScopeField, TriplesField
from memory.api.pagination import StandardPagination
from memory.domain.screening import text_redact
from memory.models import Role, Run, RunOutcome
from memory.models.turn import MAX_REF_CHARS, MAX_SPEAKER_CHARS, MAX_THREAD_CHARS
from memory.selectors.runs import RUN_FIELDS, run_get, run_list
from memory.selectors.vocabulary_view import vocabulary_listing
from memory.services.ingest.acceptance import INFER_MODES
from memory.services.ingest.retract import run_retract, run_retract_preview
from memory.services.ingest.run import (
    run_create,
    run_enqueue,
    run_execute,
    run_retry,
)
from memory.services.ingest.turns import turn_fields_clean

MAX_VOCABULARY_TEXT = 10_000


class RunOutputSerializer(serializers.ModelSerializer):
    created_by = serializers.CharField(source="created_by.username", default=None, allow_null=True)

    class Meta:
        model = Run
        fields = list(RUN_FIELDS)


class RunDetailSerializer(RunOutputSerializer):
    input = serializers.SerializerMethodField()
    prompt = serializers.SerializerMethodField()

    class Meta(RunOutputSerializer.Meta):
        fields = [
            *RunOutputSerializer.Meta.fields,
            "input",
            "prompt",
            "raw_output",
            "parsed_output",
            "result",
            "timings",
            "worker",
        ]

    def get_input(self, run: Run) -> dict[str, Any]:
        # The grants the run acts with stay internal; the raw text, secrets and all, is
        # for admins (others read it redacted, as its turn keeps it).
        text = (
            run.input_text if self.context.get("raw_input", True) else text_redact(run.input_text)
        )
        return {"text": text, "triples": (run.input_payload or {}).get("triples")}

    def get_prompt(self, run: Run) -> Any:
        """The messages sent to the model, exactly (stored as JSON text)."""
        if not run.prompt:
            return None
        try:
            return json.loads(run.prompt)
        except ValueError:
            return run.prompt


class RunWaitedSerializer(RunDetailSerializer):
    """The run of a ``wait: true`` answer: its result is said once, beside it."""

    class Meta(RunDetailSerializer.Meta):
        fields = [name for name in RunDetailSerializer.Meta.fields if name != "result"]


class RunResultSerializer(serializers.Serializer):
    run = RunWaitedSerializer()
    result = serializers.JSONField(allow_null=True)


class RunQueuedSerializer(serializers.Serializer):
    run = RunOutputSerializer()


def _respond(run: Run, *, wait: bool) -> Response:
    """202 with the queued run, or — having waited — 200 with the finished run and result."""
    if not wait:
        run_enqueue(run=run)
        response = Response(RunQueuedSerializer({"run": run}).data, status=status.HTTP_202_ACCEPTED)
        # Where to poll for the outcome.
        response["Location"] = reverse("api-run", args=[run.context.slug, run.pk])
        return response
    run = run_execute(run_id=run.pk)
    body = {"run": represented(RunWaitedSerializer, run), "result": run.result}
    return Response(body, status=status.HTTP_200_OK)


class MemoryCreateApi(APIView):
    class InputSerializer(JsonInput):
        # Sizes are checked by the service (413 text_too_large), not here, so that the
        # answer names the limit in bytes.
        text = serializers.CharField(
            required=False, allow_blank=True, default="", trim_whitespace=False
        )
        scope = ScopeField()
        infer = serializers.ChoiceField(choices=INFER_MODES, default="llm")
        triples = TriplesField(required=False, allow_null=True, default=None)
        source = serializers.CharField(  # type: ignore[assignment]
            required=False, allow_blank=True, default="", max_length=300,
            help_text="where the text came from: user, assistant, tool, document, web, email, "
            "file (alone or as kind:detail) or an address; under the default review policy, "
            "facts from relayed text (tool, document, web, email, file, an address) wait for "
            "review (relayed_source)",
        )  # fmt: skip
        wait = serializers.BooleanField(required=False, default=False)
        speaker = serializers.CharField(
            required=False, allow_blank=True, default="", max_length=MAX_SPEAKER_CHARS,
            help_text="who said the turn",
        )  # fmt: skip
        said_at = serializers.DateTimeField(
            required=False, allow_null=True, default=None,
            help_text="when it was said (ISO 8601; no zone means UTC)",
        )  # fmt: skip
        thread = serializers.CharField(
            required=False, allow_blank=True, default="", max_length=MAX_THREAD_CHARS,
            help_text="the conversation the turn belongs to (search filters by it)",
        )  # fmt: skip
        ref = serializers.CharField(
            required=False, allow_blank=True, default="", max_length=MAX_REF_CHARS,
            help_text="the caller's own id for the turn",
        )  # fmt: skip

    @extend_schema(
        request=InputSerializer,
        responses={
            202: RunQueuedSerializer,
            200: RunResultSerializer,
            400: ErrorSerializer,
            403: ErrorSerializer,
            413: ErrorSerializer,
            503: ErrorSerializer,
        },
        description="Write a memory. `infer`: `llm` (the chat model extracts), `triples` "
        "(`triples: {entities, relations, attributes, actions}` as given), `preview` "
        "(triples if given, else the model: everything runs, nothing is kept but the run), "
        "`none` (the text is kept as a turn only). Whatever the mode (but `preview`), the text "
        "is kept as a searchable turn with the optional `speaker`, `said_at`, `thread` and "
        "`ref` (`POST search` with `target: turns`), and the facts it yields point back to "
        "it. 202 with the queued run, or with `wait: true` 200 with the finished run and "
        "its result.",
    )
    def post(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        run = run_create(
            access=access,
            text=v["text"],
            scope=v["scope"],
            infer=v["infer"],
            triples=v["triples"],
            source=v["source"],
            turn=turn_fields_clean(
                speaker=v["speaker"], said_at=v["said_at"], thread=v["thread"], ref=v["ref"]
            ),
        )
        return _respond(run, wait=v["wait"])


class RunListApi(APIView):
    pagination_class = StandardPagination

    class Params(serializers.Serializer):
        outcome = serializers.ChoiceField(choices=RunOutcome.choices, required=False)
        mode = serializers.ChoiceField(choices=INFER_MODES, required=False)

    @extend_schema(parameters=[Params], responses=RunOutputSerializer(many=True))
    def get(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        params = query_params(request, self.Params)
        runs = run_list(access=access, outcome=params.get("outcome"), mode=params.get("mode"))
        return paginated(request, runs, RunOutputSerializer, self)


class RunDetailApi(APIView):
    @extend_schema(responses=RunDetailSerializer)
    def get(self, request: Request, ctx: str, run_id: int) -> Response:
        access = access_for(request, ctx)
        run = run_get(access=access, run_id=run_id)
        admin = access.has_role(Role.ADMIN)
        return Response(RunDetailSerializer(run, context={"raw_input": admin}).data)


class RunRetryApi(APIView):
    class InputSerializer(JsonInput):
        wait = serializers.BooleanField(required=False, default=False)

    @extend_schema(
        request=InputSerializer,
        responses={202: RunQueuedSerializer, 200: RunResultSerializer, 409: ErrorSerializer},
        description="Retry a failed run: a new run with the same input (`retry_of` links it).",
    )
    def post(self, request: Request, ctx: str, run_id: int) -> Response:
        access = access_for(request, ctx)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        retry = run_retry(access=access, run=run_get(access=access, run_id=run_id))
        return _respond(retry, wait=data.validated_data["wait"])


class RetractFactSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    subject = serializers.CharField()
    predicate = serializers.CharField()
    object = serializers.CharField()
    status = serializers.CharField()


class RetractEntitySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    type = serializers.CharField(required=False)
    reason = serializers.CharField(required=False)


class RetractAliasesSerializer(serializers.Serializer):
    entity = serializers.IntegerField()
    name = serializers.CharField()
    aliases = serializers.ListField(child=serializers.CharField())
    keys = serializers.ListField(child=serializers.CharField())


class RetractOutputSerializer(serializers.Serializer):
    run = serializers.IntegerField()
    preview = serializers.BooleanField()
    facts_retracted = serializers.IntegerField(help_text="the run's facts that become retracted")
    facts_deleted = serializers.IntegerField(
        help_text="the run's facts deleted with an entity only the run used"
    )
    facts = RetractFactSerializer(many=True, help_text="the first 200 of those facts")
    superseded_restored = serializers.ListField(
        child=serializers.IntegerField(), help_text="facts the run superseded: current again"
    )
    conflicts_closed = serializers.ListField(child=serializers.IntegerField())
    entities_deleted = RetractEntitySerializer(many=True)
    entities_kept = RetractEntitySerializer(
        many=True, help_text="entities the run created that later writes use: they stay"
    )
    aliases_removed = RetractAliasesSerializer(many=True)
    identifiers_removed = serializers.IntegerField()
    facts_reobserved_kept = serializers.IntegerField(
        help_text="facts the run only saw again: known before it, they stay"
    )
    dependencies = serializers.ListField(
        child=serializers.CharField(), help_text="what later writes built on the run, in words"
    )
    audit_event = serializers.IntegerField(
        required=False, help_text="the event whose undo brings everything back"
    )


class RunRetractApi(APIView):
    class InputSerializer(JsonInput):
        preview = serializers.BooleanField(required=False, default=False)

    @extend_schema(
        request=InputSerializer,
        responses={
            200: RetractOutputSerializer,
            403: ErrorSerializer,
            404: ErrorSerializer,
            409: ErrorSerializer,
        },
        description="Retract what a finished run wrote, in one transaction (`preview: true` "
        "answers what would change and writes nothing). Its facts become retracted, what "
        "they superseded is current again, the spellings and identifiers it added go, and "
        "entities only it used are deleted; what later writes built on it stays. Undo it "
        "with `audit/{audit_event}/undo`. 409: `already_retracted`, `run_not_finished`, "
        "`nothing_to_retract`.",
    )
    def post(self, request: Request, ctx: str, run_id: int) -> Response:
        access = access_for(request, ctx)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run = run_get(access=access, run_id=run_id)
        if data.validated_data["preview"]:
            plan = run_retract_preview(access=access, run=run)
            return Response({**plan.as_dict(), "preview": True})
        plan, event = run_retract(access=access, run=run)
        return Response({**plan.as_dict(), "preview": False, "audit_event": event.pk})


class VocabularyApi(APIView):
    class Params(serializers.Serializer):
        scope = ScopeField(help_text="the write scope")
        text = serializers.CharField(
            required=False,
            allow_blank=True,
            default="",
            max_length=MAX_VOCABULARY_TEXT,
            help_text="a turn: with more than 500 entities, the ones it names or resembles "
            "take places first",
        )

    class OutputSerializer(serializers.Serializer):
        scope = serializers.CharField()
        visible_scopes = serializers.ListField(child=serializers.CharField())
        entities = serializers.ListField(child=serializers.DictField())
        entities_truncated = serializers.BooleanField()
        relation_labels = serializers.ListField(child=serializers.CharField())
        attribute_keys = serializers.ListField(child=serializers.CharField())
        action_verbs = serializers.ListField(child=serializers.CharField())
        prompt_section = serializers.CharField()

    @extend_schema(
        parameters=[Params],
        responses={200: OutputSerializer, 503: ErrorSerializer},
        description="The four vocabulary lists exactly as the next extraction prompt for a "
        "write into `scope` would show them (`prompt_section` is that part of the prompt). "
        "503 `embedder_unavailable` when `text` needs embedding (more than 500 entities "
        "visible) and the embedding model is unavailable; without `text` it still works.",
    )
    def get(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        params = query_params(request, self.Params)
        listing = vocabulary_listing(access=access, scope=params["scope"], text=params["text"])
        return Response(self.OutputSerializer(listing).data)
