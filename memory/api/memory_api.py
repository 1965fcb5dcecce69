"""``GET export`` (a whole memory as JSON lines, streamed) and ``POST import`` (an export,
or a mem0 or Graphiti export, read into an empty context by a job with progress)."""

from __future__ import annotations

from typing import Any

from django.http import StreamingHttpResponse
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, OpenApiTypes, extend_schema
from rest_framework import serializers
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory.api.common import access_for
from memory.api.parsers import JsonLinesParser, NdjsonParser, PlainTextParser
from memory.kernel.errors import NotFound, ValidationFailed
from memory.models import MEMORY_IMPORT_FORMATS, ImportJob, Role
from memory.services.transfer.export import memory_export_lines
from memory.services.transfer.jobs import memory_import_job_create


class RawJsonParser(PlainTextParser):
    """A mem0 or Graphiti export is JSON (mem0 answers may be several documents): kept as
    text for the importer."""

    media_type = "application/json"


class MemoryImportJobSerializer(serializers.ModelSerializer):
    percent = serializers.IntegerField(read_only=True)

    class Meta:
        model = ImportJob
        fields = [
            "id",
            "format",
            "status",
            "done",
            "total",
            "percent",
            "report",
            "error",
            "created_at",
            "started_at",
            "finished_at",
        ]


class MemoryExportApi(APIView):
    @extend_schema(
        responses={(200, "application/x-ndjson"): OpenApiTypes.STR},
        description="The whole context as JSON lines (admins): header, registry, entities, "
        "identifiers, turns, documents with chunks and keywords, facts, conflicts, and the "
        "counts. Streamed; ids are this server's (an import gives new ones).",
    )
    def get(self, request: Request, ctx: str) -> StreamingHttpResponse:
        access = access_for(request, ctx)
        access.require_role(Role.ADMIN)
        response = StreamingHttpResponse(
            memory_export_lines(access=access), content_type="application/x-ndjson"
        )
        response["Content-Disposition"] = f'attachment; filename="{ctx}.memory.jsonl"'
        return response


class MemoryImportApi(APIView):
    parser_classes = [
        NdjsonParser,
        JsonLinesParser,
        RawJsonParser,
        PlainTextParser,
        MultiPartParser,
    ]

    @extend_schema(
        parameters=[
            OpenApiParameter("format", OpenApiTypes.STR, enum=list(MEMORY_IMPORT_FORMATS)),
        ],
        request={
            "application/x-ndjson": {"type": "string", "minLength": 1},
            "application/json": OpenApiTypes.OBJECT,
            "multipart/form-data": {
                "type": "object",
                "properties": {"file": {"type": "string", "format": "binary"}},
                "required": ["file"],
            },
        },
        responses={202: MemoryImportJobSerializer},
        description="Read an export (`format=memory`, the default), a mem0 export (`mem0`) "
        "or a Graphiti export (`graphiti`) into this context, which must hold no "
        "entities, facts, turns or documents (admins). Answers 202 with the job; poll "
        "`import/{id}` for its progress. Nothing is written unless all of it is. The "
        "file is kept on the job: at most 256 MB as a multipart `file` (`file_too_large`), "
        "a raw body at most MEMORY_MAX_REQUEST_BYTES (413); a larger memory is imported "
        "with `manage.py import_memory`, which streams it.",
    )
    def post(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        access.require_role(Role.ADMIN)
        format = request.query_params.get("format", "memory")
        content = _content(request)
        job = memory_import_job_create(access=access, content=content, format=format)
        response = Response(MemoryImportJobSerializer(job).data, status=202)
        response["Location"] = reverse(
            "api-memory-import-job", kwargs={"ctx": ctx, "job_id": job.pk}
        )
        return response


class MemoryImportJobApi(APIView):
    @extend_schema(responses=MemoryImportJobSerializer)
    def get(self, request: Request, ctx: str, job_id: int) -> Response:
        access = access_for(request, ctx)
        access.require_role(Role.ADMIN)
        job = ImportJob.objects.filter(context=access.context, pk=job_id).first()
        if job is None:
            raise NotFound(f"import {job_id} not found", code="import_not_found")
        return Response(MemoryImportJobSerializer(job).data)


def _content(request: Request) -> str:
    upload = request.FILES.get("file") if hasattr(request, "FILES") else None
    raw: Any = upload.read() if upload is not None else request.data
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ValidationFailed("the file is not UTF-8 text", code="invalid_export") from None
    if not isinstance(raw, str) or not raw.strip():
        raise ValidationFailed(
            "send the export as the body (application/x-ndjson, or application/json for "
            "mem0 and Graphiti) or as a multipart 'file'",
            code="missing_file",
        )
    if "\x00" in raw:
        raise ValidationFailed("the file holds NUL characters", code="invalid_export")
    return raw
