"""A curator's actions on single facts over REST (correct, edit, restore, retract many)
and the conversations they came from. The same services as the dashboard and MCP."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory.api import facts
from memory.api.common import access_for, query_params
from memory.api.facts import FactOutputSerializer
from memory.api.fields import NON_BLANK_TEXT_PATTERN, JsonInput, PredicateTextField
from memory.domain.access import ContextAccess
from memory.kernel.errors import ValidationFailed
from memory.models import Fact
from memory.models.turn import MAX_THREAD_CHARS
from memory.selectors.conversations import (
    THREADS_PAGE,
    TURNS_PAGE,
    conversation_get,
    thread_list,
)
from memory.selectors.entity_lookup import resolve_entity_name
from memory.selectors.fact_pages import fact_get
from memory.services.facts.corrections import fact_correct
from memory.services.facts.edit import FactEdit, FactEdited, fact_edit
from memory.services.facts.restore import FactRestored, fact_restore
from memory.services.facts.retraction import facts_retract

MAX_RETRACT_IDS = 500


@extend_schema_field(
    {
        "oneOf": [
            {"type": "integer", "minimum": 1},
            {"type": "string", "minLength": 1, "maxLength": 200, "pattern": NON_BLANK_TEXT_PATTERN},
        ]
    }
)
class EntityIdOrNameField(serializers.Field):
    """An existing entity by id (``42``) or by a name, alias or identifier (``"Acme"``)."""

    default_error_messages = {"invalid": "give an entity id or an entity's name"}

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, bool) or not isinstance(data, int | str):
            self.fail("invalid")
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class ActionOutputSerializer(serializers.Serializer):
    fact = FactOutputSerializer()
    conflict = serializers.IntegerField(
        allow_null=True, help_text="the conflict recorded when the fact could not be current"
    )
    audit_event = serializers.IntegerField(
        allow_null=True, help_text="undo with POST audit/{id}/undo; null when nothing changed"
    )
    summary = serializers.CharField()


class CorrectOutputSerializer(serializers.Serializer):
    corrected = FactOutputSerializer(help_text="the fact as it is now (superseded)")
    fact = FactOutputSerializer(help_text="the correction, now current")
    audit_event = serializers.IntegerField()


def _fact_out(access: ContextAccess, fact_id: int) -> Fact:
    return fact_get(access=access, fact_id=fact_id)


class FactCorrectApi(APIView):
    class InputSerializer(JsonInput):
        value = serializers.JSONField(required=False, allow_null=True)
        object = EntityIdOrNameField(required=False)
        confidence = serializers.FloatField(min_value=0, max_value=1, required=False, default=1.0)
        reason = serializers.CharField(max_length=300, required=False, default="")

    @extend_schema(
        request=InputSerializer,
        responses={201: CorrectOutputSerializer},
        description="Say a current fact was wrong: the correction (a new value, or a new "
        "object for a relation) supersedes it and keeps it in history. Audited and undoable. "
        "Needs the curator role and a write grant on the fact's scope.",
    )
    def post(self, request: Request, ctx: str, fact_id: int) -> Response:
        access = access_for(request, ctx)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        with transaction.atomic():
            fact = fact_get(access=access, fact_id=fact_id)
            target = (
                resolve_entity_name(access=access, ref=v["object"], prefer_scope=fact.scope).entity
                if "object" in v
                else None
            )
            correction = fact_correct(
                access=access,
                fact=fact,
                value=v.get("value"),
                object=target,
                confidence=v["confidence"],
                reason=v["reason"],
            )
        body = {
            "corrected": _fact_out(access, correction.old.pk),
            "fact": _fact_out(access, correction.new.pk),
            "audit_event": correction.audit_event_id,
        }
        return Response(CorrectOutputSerializer(body).data, status=201)


class FactEditSerializer(JsonInput):
    predicate = PredicateTextField(
        required=False, help_text="another registered predicate of the same kind"
    )
    swap = serializers.BooleanField(
        required=False, default=False, help_text="subject and object change places"
    )
    valid_from = serializers.DateTimeField(required=False, allow_null=True)
    valid_until = serializers.DateTimeField(required=False, allow_null=True)
    confidence = serializers.FloatField(min_value=0, max_value=1, required=False)
    importance = serializers.FloatField(min_value=0, max_value=1, required=False)
    reason = serializers.CharField(max_length=300, required=False, default="")

    def edit(self) -> FactEdit:
        v = self.validated_data
        return FactEdit(
            predicate=v.get("predicate"),
            swap=v["swap"],
            valid_from=v.get("valid_from"),
            valid_until=v.get("valid_until"),
            clear_valid_from="valid_from" in v and v["valid_from"] is None,
            clear_valid_until="valid_until" in v and v["valid_until"] is None,
            confidence=v.get("confidence"),
            importance=v.get("importance"),
            reason=v["reason"],
        )


class FactDetailApi(facts.FactDetailApi):
    """GET and DELETE facts/{id} (facts.py), and PATCH: a curator's edit."""

    @extend_schema(
        request=FactEditSerializer,
        responses={200: ActionOutputSerializer},
        description="Edit a fact in place: predicate (another registered one of the same "
        "kind), subject and object swapped, validity, confidence, importance. An edit that "
        "would give its subject a second current value of a single-valued predicate keeps "
        "it contested and records a conflict. Audited and undoable; needs the curator role.",
    )
    def patch(self, request: Request, ctx: str, fact_id: int) -> Response:
        access = access_for(request, ctx)
        data = FactEditSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        edited = fact_edit(access=access, fact_id=fact_id, edit=data.edit())
        return Response(_action_out(access, edited))


class FactRestoreApi(APIView):
    class InputSerializer(JsonInput):
        reason = serializers.CharField(max_length=300, required=False, default="")

    @extend_schema(
        request=InputSerializer,
        responses={200: ActionOutputSerializer},
        description="Bring a retracted fact back. Beside another current value of a "
        "single-valued predicate it comes back contested, with a conflict. Audited and "
        "undoable; needs the curator role.",
    )
    def post(self, request: Request, ctx: str, fact_id: int) -> Response:
        access = access_for(request, ctx)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        restored = fact_restore(
            access=access, fact_id=fact_id, reason=data.validated_data["reason"]
        )
        return Response(_action_out(access, restored))


def _action_out(access: ContextAccess, done: FactEdited | FactRestored) -> dict[str, Any]:
    """An edit's or a restore's answer: the fact as it is now, the conflict it recorded."""
    body = {
        "fact": _fact_out(access, done.fact.pk),
        "conflict": done.conflict.pk if done.conflict is not None else None,
        "audit_event": done.audit_event_id,
        "summary": done.summary,
    }
    return dict(ActionOutputSerializer(body).data)


class FactsRetractApi(APIView):
    class InputSerializer(JsonInput):
        ids = serializers.ListField(
            child=serializers.IntegerField(min_value=1),
            min_length=1,
            max_length=MAX_RETRACT_IDS,
        )
        reason = serializers.CharField(max_length=300, required=False, default="")

    class OutputSerializer(serializers.Serializer):
        retracted = serializers.ListField(
            child=serializers.IntegerField(), help_text="the facts this call retracted"
        )
        audit_event = serializers.IntegerField(allow_null=True)
        summary = serializers.CharField()

    @extend_schema(
        request=InputSerializer,
        responses={200: OutputSerializer},
        description="Retract many facts in one audited action (one undo brings them all "
        "back). Facts already retracted are left as they are. Needs a write grant on "
        "each fact's scope; an unknown id refuses the whole call.",
    )
    def post(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        done = facts_retract(
            access=access,
            fact_ids=data.validated_data["ids"],
            reason=data.validated_data["reason"],
        )
        body = {
            "retracted": done.changed,
            "audit_event": done.audit_event_id,
            "summary": done.summary,
        }
        return Response(self.OutputSerializer(body).data)


# --- conversations ---------------------------------------------------------------------


class ThreadSerializer(serializers.Serializer):
    thread = serializers.CharField()
    speakers = serializers.ListField(child=serializers.CharField())
    first_said_at = serializers.DateTimeField(allow_null=True)
    last_said_at = serializers.DateTimeField(allow_null=True)
    turns = serializers.IntegerField()
    facts = serializers.IntegerField()
    scopes = serializers.ListField(child=serializers.CharField())


class ThreadListApi(APIView):
    class Params(serializers.Serializer):
        offset = serializers.IntegerField(required=False, min_value=0, max_value=1_000_000)

    class OutputSerializer(serializers.Serializer):
        results = ThreadSerializer(many=True)
        next_offset = serializers.IntegerField(allow_null=True)

    @extend_schema(
        operation_id="api_v1_contexts_threads_list",
        parameters=[Params],
        responses=OutputSerializer,
        description=f"Conversations (turns written with a thread), the most recently "
        f"active first, {THREADS_PAGE} a page.",
    )
    def get(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        offset = query_params(request, self.Params).get("offset", 0)
        rows = thread_list(access=access, offset=offset, limit=THREADS_PAGE + 1)
        body = {
            "results": rows[:THREADS_PAGE],
            "next_offset": offset + THREADS_PAGE if len(rows) > THREADS_PAGE else None,
        }
        return Response(self.OutputSerializer(body).data)


class TurnSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="turn.pk")
    text = serializers.CharField(source="turn.text")
    speaker = serializers.CharField(source="turn.speaker")
    said_at = serializers.DateTimeField(source="turn.said_at", allow_null=True)
    ref = serializers.CharField(source="turn.ref")
    scope = serializers.CharField(source="turn.scope")
    run = serializers.IntegerField(source="turn.run_id", allow_null=True)
    facts = FactOutputSerializer(many=True)


class ThreadDetailApi(APIView):
    class Params(serializers.Serializer):
        after = serializers.IntegerField(
            required=False, min_value=1, help_text="the last turn id of the page before"
        )

    class OutputSerializer(serializers.Serializer):
        thread = serializers.CharField()
        turns = TurnSerializer(many=True)
        next_after = serializers.IntegerField(allow_null=True)

    @extend_schema(
        operation_id="api_v1_contexts_thread_retrieve",
        parameters=[
            Params,
            OpenApiParameter("thread", str, OpenApiParameter.PATH, description="the thread"),
        ],
        responses=OutputSerializer,
        description=f"A conversation's turns in the order they were said, {TURNS_PAGE} a "
        "page, each with the facts it produced.",
    )
    def get(self, request: Request, ctx: str, thread: str) -> Response:
        access = access_for(request, ctx)
        if len(thread) > MAX_THREAD_CHARS or "\x00" in thread:
            raise ValidationFailed(
                f"a thread has at most {MAX_THREAD_CHARS} characters", code="invalid_thread"
            )
        after = query_params(request, self.Params).get("after")
        conversation = conversation_get(access=access, thread=thread, after=after)
        return Response(self.OutputSerializer(conversation).data)
