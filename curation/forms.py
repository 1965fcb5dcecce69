"""Dashboard forms: they check the shape of input; the services decide what it means."""

from __future__ import annotations

import json
import re
from typing import Any

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError

from memory.domain.entity_names import MAX_NAME_LENGTH
from memory.kernel.errors import ValidationFailed
from memory.kernel.scopes import ScopeError, scope_validate
from memory.models import EntityType, Predicate, PredicateKind
from memory.models.predicate import Lifecycle
from memory.services.merges.plan import MAX_MERGED
from memory.services.registry.file import PredicateEntry, registry_file_parse
from memory.services.transfer.jobs import MAX_MEMORY_IMPORT_BYTES
from memory.services.transfer.seeding import MAX_IMPORT_BYTES

MAX_REGISTRY_FILE_BYTES = 2 * 1024 * 1024
ENTITY_TYPE_CHOICES = EntityType.choices
MAX_CLUSTER_SIZE = MAX_MERGED + 1  # a survivor and the entities merged into it


def _scope(value: str) -> str:
    try:
        return scope_validate(value)
    except ScopeError as exc:
        raise ValidationError(str(exc)) from None


def _lines(value: str) -> list[str]:
    """One item per line (a ``;`` also separates), blanks dropped."""
    return [p.strip() for line in value.splitlines() for p in line.split(";") if p.strip()]


def _read_text(upload: Any, limit: int) -> str:
    if upload.size > limit:
        raise ValidationError(f"the file is {upload.size:,} bytes; at most {limit:,}")
    raw = upload.read()
    try:
        text: str = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationError(
            f"the file is not UTF-8 text (byte {exc.start}); save it as UTF-8"
        ) from None
    if "\x00" in text:
        raise ValidationError("the file contains NUL bytes: it is not text")
    if not text.strip():
        raise ValidationError("the file is empty")
    return text


# --- drift ----------------------------------------------------------------------------


class DriftResolveForm(forms.Form):
    action = forms.ChoiceField(choices=[("alias", "Alias"), ("reject", "Reject")])
    target = forms.CharField(max_length=100, required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("action") == "alias" and not data.get("target"):
            self.add_error("target", "choose the registered predicate to alias it to")
        return data


class _NameList(forms.MultipleChoiceField):
    """Names chosen on the page; the service decides whether each is still open drift."""

    def valid_value(self, value: Any) -> bool:
        return isinstance(value, str) and 0 < len(value) <= 100


class DriftBulkForm(forms.Form):
    """Several drift items at once; each alias target arrives as ``target:<name>``."""

    action = forms.ChoiceField(choices=[("alias", "Alias"), ("reject", "Reject")])
    names = _NameList(error_messages={"required": "select at least one drift item"})

    def names_chosen(self) -> list[str]:
        return list(dict.fromkeys(self.cleaned_data.get("names", [])))

    def targets(self) -> dict[str, str]:
        return {n: (self.data.get(f"target:{n}") or "").strip() for n in self.names_chosen()}


class PredicateDefinitionForm(forms.Form):
    """A predicate's editable fields (promote a drift item, or edit a registered one)."""

    description = forms.CharField(
        max_length=2000,
        required=False,
        widget=forms.Textarea,
        help_text="What the predicate means, in a sentence the extraction prompt shows.",
    )
    example = forms.CharField(
        max_length=2000,
        required=False,
        help_text="One example fact, e.g. “Alex works_at Acme”.",
    )
    category = forms.CharField(
        max_length=50,
        initial="general",
        help_text="Pick an existing category or type a new one; the registry groups by it.",
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
    )
    kind = forms.ChoiceField(
        choices=PredicateKind.choices,
        help_text="Relation: between two entities. Attribute: an entity's value. "
        "Action: something an entity did.",
    )
    subject_types = forms.MultipleChoiceField(
        choices=ENTITY_TYPE_CHOICES,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Entity types the subject may have; none ticked allows any.",
    )
    object_types = forms.MultipleChoiceField(
        choices=ENTITY_TYPE_CHOICES,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Entity types the object may have (relations); none ticked allows any.",
    )
    inverse = forms.CharField(
        max_length=100,
        required=False,
        help_text="The same fact read the other way (employs for works_at); facts written "
        "with it are stored under this predicate, subject and object swapped.",
    )
    default_importance = forms.FloatField(
        min_value=0.0,
        max_value=1.0,
        initial=0.5,
        help_text="0 to 1: how much a fact of this predicate matters when an entity's facts "
        "are ranked for an agent (0.5 is neutral).",
    )
    ranking_weight = forms.FloatField(
        min_value=0.01,
        max_value=10.0,
        initial=1.0,
        help_text="Multiplies the ranking score (1 leaves it as is; 2 ranks these facts "
        "twice as high).",
    )
    single_valued = forms.BooleanField(
        required=False,
        help_text="A subject has one current value: a new one supersedes the old.",
    )
    is_aggregate = forms.BooleanField(
        required=False, help_text="One value updated in place (a count or total)."
    )
    lifecycle = forms.ChoiceField(
        choices=Lifecycle.choices,
        help_text="How facts age: kept until replaced, or expiring after their validity.",
    )
    default_validity_days = forms.IntegerField(
        min_value=1,
        max_value=36500,
        required=False,
        help_text="Days a fact stays current when the lifecycle expires it; empty for never.",
    )
    exclude_from_prompt = forms.BooleanField(
        required=False,
        help_text="Keep it out of the vocabulary the extraction model is shown.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # One datalist per form (a page may hold several): its id follows the field's.
        auto_id = str(self.auto_id) if self.auto_id else ""
        field_id = auto_id % "category" if "%s" in auto_id else "category"
        self.fields["category"].widget.attrs["list"] = f"{field_id}-choices"

    def clean_category(self) -> str:
        """ "Organizational" or "Human resources" as shown are the stored organizational /
        human_resources: categories are compared as the registry stores them."""
        raw: str = self.cleaned_data["category"]
        category = "_".join(raw.strip().lower().replace("-", " ").split())
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,49}", category):
            raise ValidationError(
                "a category is letters, digits, spaces or _, starting with a letter"
            )
        return category

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("single_valued") and data.get("is_aggregate"):
            self.add_error(
                "is_aggregate",
                "a predicate cannot be both single-valued (a new value supersedes the old) "
                "and aggregate (one value updated in place)",
            )
        return data

    @classmethod
    def initial_for(cls, predicate: Predicate) -> dict[str, Any]:
        return {name: getattr(predicate, name) for name in cls.base_fields}

    def definition(self) -> dict[str, Any]:
        return dict(self.cleaned_data)


class AliasForm(forms.Form):
    alias = forms.CharField(max_length=100)


class FlagForm(forms.Form):
    flag = forms.ChoiceField(
        choices=[(f, f) for f in ("single_valued", "is_aggregate", "exclude_from_prompt")]
    )
    value = forms.TypedChoiceField(choices=[("1", "on"), ("0", "off")], coerce=lambda v: v == "1")


class RegistryImportForm(forms.Form):
    file = forms.FileField()

    def clean_file(self) -> list[PredicateEntry]:
        text = _read_text(self.cleaned_data["file"], MAX_REGISTRY_FILE_BYTES)
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ValidationError(f"the file is not JSON: {exc}") from None
        try:
            return registry_file_parse(data)
        except ValidationFailed as exc:
            raise ValidationError(exc.message) from None


class RegistryFilterForm(forms.Form):
    status = forms.ChoiceField(
        choices=[
            ("registered", "Registered"),
            ("observed", "Observed (drift)"),
            ("rejected", "Rejected"),
            ("all", "All"),
        ],
        required=False,
    )
    category = forms.CharField(max_length=50, required=False)


# --- conflicts ------------------------------------------------------------------------


class ConflictResolveForm(forms.Form):
    action = forms.ChoiceField(
        choices=[
            ("keep_current", "Keep current"),
            ("keep_new", "Keep new"),
            ("keep_both", "Keep both"),
            ("edit", "Edit"),
        ]
    )
    value = forms.CharField(max_length=2000, required=False, strip=True)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("action") == "edit" and not data.get("value"):
            self.add_error("value", "type the corrected value")
        return data


# --- entities -------------------------------------------------------------------------


class EntityFilterForm(forms.Form):
    q = forms.CharField(
        max_length=200,
        required=False,
        label="Search",
        widget=forms.TextInput(
            attrs={"type": "search", "placeholder": "Name or alias", "autocomplete": "off"}
        ),
    )
    type = forms.ChoiceField(choices=[("", "Any type"), *ENTITY_TYPE_CHOICES], required=False)
    scope = forms.CharField(
        max_length=300,
        required=False,
        widget=forms.TextInput(attrs={"placeholder": "e.g. org/acme"}),
    )
    seeded = forms.ChoiceField(
        choices=[("", "Seeded or not"), ("yes", "Seeded"), ("no", "Not seeded")], required=False
    )

    def clean_scope(self) -> str:
        scope: str = self.cleaned_data["scope"]
        return _scope(scope) if scope.strip() else ""

    def filters(self) -> dict[str, Any]:
        data = self.cleaned_data
        seeded = {"yes": True, "no": False}.get(data.get("seeded") or "")
        return {
            "q": data.get("q") or None,
            "type": data.get("type") or None,
            "scope": data.get("scope") or None,
            "seeded": seeded,
        }


class _EntityFieldsForm(forms.Form):
    name = forms.CharField(max_length=300)
    type = forms.ChoiceField(choices=ENTITY_TYPE_CHOICES)
    aliases = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One per line.",
    )
    attributes = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text='A JSON object, e.g. {"role": "CTO"}.',
    )

    def clean_aliases(self) -> list[str]:
        return _lines(self.cleaned_data["aliases"])

    def clean_attributes(self) -> dict[str, Any]:
        raw = self.cleaned_data["attributes"].strip()
        if not raw:
            return {}
        try:
            value = json.loads(raw)
        except ValueError as exc:
            raise ValidationError(f"not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ValidationError('a JSON object, like {"role": "CTO"}')
        return value


def _identifiers(raw: str) -> list[dict[str, str]]:
    items = []
    for part in _lines(raw):
        kind, sep, value = part.partition(":")
        if not sep or not kind.strip() or not value.strip():
            raise ValidationError(f"{part[:60]!r} must look like kind:value (email:a@b.c)")
        items.append({"kind": kind.strip(), "value": value.strip()})
    return items


class EntityEditForm(_EntityFieldsForm):
    identifiers_add = forms.CharField(
        required=False,
        label="Add identifiers",
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="kind:value, one per line (email:alex@acme.com).",
    )

    def clean_identifiers_add(self) -> list[dict[str, str]]:
        return _identifiers(self.cleaned_data["identifiers_add"])


class EntitySeedForm(_EntityFieldsForm):
    field_order = ["name", "type", "scope", "aliases", "identifiers", "attributes"]

    scope = forms.CharField(
        max_length=300, widget=forms.TextInput(attrs={"placeholder": "e.g. org/acme"})
    )
    identifiers = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="kind:value, one per line (email:alex@acme.com).",
    )

    def clean_scope(self) -> str:
        return _scope(self.cleaned_data["scope"])

    def clean_identifiers(self) -> list[dict[str, str]]:
        return _identifiers(self.cleaned_data["identifiers"])


class SeedUploadForm(forms.Form):
    file = forms.FileField(help_text="CSV with a header (name,type,scope,…) or JSONL.")
    format = forms.ChoiceField(
        choices=[("", "Detect"), ("csv", "CSV"), ("jsonl", "JSONL")], required=False
    )
    scope_default = forms.CharField(
        max_length=300,
        required=False,
        label="Default scope",
        help_text="For rows without a scope.",
    )

    def clean_file(self) -> str:
        return _read_text(self.cleaned_data["file"], MAX_IMPORT_BYTES)

    def clean_scope_default(self) -> str:
        scope: str = self.cleaned_data["scope_default"]
        return _scope(scope) if scope.strip() else ""


class AuditFilterForm(forms.Form):
    action = forms.CharField(max_length=50, required=False)


# --- duplicates -----------------------------------------------------------------------


class _IdList(forms.Field):
    """Several integer ids posted under one name."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value: Any) -> list[int]:
        values = value if isinstance(value, list | tuple) else ([value] if value else [])
        try:
            return list(dict.fromkeys(int(v) for v in values))
        except (TypeError, ValueError):
            raise ValidationError("ids must be whole numbers") from None


class DuplicateClusterForm(forms.Form):
    """A cluster as the duplicates screen posts it: its members, and for a merge or a
    preview the survivor among them and the final name."""

    ids = _IdList()
    survivor = forms.IntegerField(required=False)
    name = forms.CharField(max_length=MAX_NAME_LENGTH, required=False, strip=True)

    def __init__(self, *args: Any, needs_survivor: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.needs_survivor = needs_survivor

    def clean_ids(self) -> list[int]:
        ids: list[int] = self.cleaned_data["ids"]
        if not 2 <= len(ids) <= MAX_CLUSTER_SIZE:
            raise ValidationError(f"a cluster has 2–{MAX_CLUSTER_SIZE} entities")
        return ids

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not self.needs_survivor or "ids" not in data:
            return data
        survivor = data.get("survivor")
        if survivor is None:
            self.add_error("survivor", "choose the entity that survives")
        elif survivor not in data["ids"]:
            self.add_error("survivor", "the survivor must be one of the cluster's entities")
        return data

    def key(self) -> str:
        """The cluster's key on the page (its member ids, sorted), even when invalid."""
        data: Any = self.data  # a QueryDict: one name, several values
        return cluster_key(data.getlist("ids"))

    def merged_ids(self) -> list[int]:
        survivor = self.cleaned_data["survivor"]
        return [i for i in self.cleaned_data["ids"] if i != survivor]


def cluster_key(ids: Any) -> str:
    return "-".join(str(i) for i in sorted({int(i) for i in ids if str(i).isdigit()}))


class DocumentFilterForm(forms.Form):
    q = forms.CharField(
        max_length=200,
        required=False,
        label="Title",
        widget=forms.TextInput(
            attrs={"type": "search", "placeholder": "Words in the title", "autocomplete": "off"}
        ),
    )
    scope = forms.CharField(
        max_length=300,
        required=False,
        widget=forms.TextInput(attrs={"placeholder": "e.g. org/acme"}),
        help_text="Only documents in exactly this scope.",
    )

    def clean_scope(self) -> str:
        scope: str = self.cleaned_data["scope"]
        return _scope(scope) if scope.strip() else ""

    def filters(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {"title": data.get("q") or None, "scope": data.get("scope") or None}


class DocumentAddForm(forms.Form):
    """A document typed or pasted in, or a UTF-8 text file (``.txt``, ``.md``)."""

    title = forms.CharField(max_length=500, help_text="Shown in lists and search results.")
    scope = forms.CharField(
        max_length=300,
        widget=forms.TextInput(attrs={"placeholder": "e.g. org/acme"}),
        help_text="Who may read it: readers of this scope.",
    )
    text = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 6, "placeholder": "Paste the text here…"}),
        help_text="Or choose a file below.",
    )
    file = forms.FileField(
        required=False,
        label="Text file",
        widget=forms.ClearableFileInput(attrs={"accept": ".txt,.md,text/plain,text/markdown"}),
        help_text="UTF-8 text or Markdown.",
    )
    source = forms.CharField(
        max_length=300,
        required=False,
        widget=forms.TextInput(attrs={"placeholder": "e.g. a URL or a file path"}),
        help_text="Where it came from (optional).",
    )

    def clean_scope(self) -> str:
        return _scope(self.cleaned_data["scope"])

    def clean_file(self) -> str:
        upload = self.cleaned_data.get("file")
        return _read_text(upload, settings.MEMORY_MAX_TEXT_BYTES) if upload else ""

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        typed, uploaded = (data.get("text") or "").strip(), data.get("file") or ""
        if typed and uploaded:
            raise ValidationError("Paste the text or choose a file, not both.")
        if not typed and not uploaded:
            raise ValidationError("Paste the document's text or choose a text file.")
        data["content"] = uploaded or data["text"]
        return data


class TokenCreateForm(forms.Form):
    user = forms.TypedChoiceField(
        coerce=int,
        label="For",
        help_text="The member the token acts as (with their role in this context).",
    )
    name = forms.CharField(
        max_length=100,
        required=False,
        help_text="What the token is for, e.g. “support agent”.",
    )
    grants = forms.CharField(
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "read:*\nwrite:org/acme/*"}),
        help_text="One per line: read or write (or read,write), a colon and a scope pattern — "
        "* for every scope, P/* for P and below, P for P alone.",
    )
    trust = forms.ChoiceField(
        choices=[("trusted", "Trusted"), ("untrusted", "Untrusted")],
        initial="trusted",
        required=False,
        help_text="Untrusted: the facts it writes wait for review (the context's fact review "
        "setting), and it never acts as a curator.",
    )

    def __init__(self, *args: Any, members: list[tuple[int, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["user"].choices = members  # type: ignore[attr-defined]

    def clean_grants(self) -> list[str]:
        return _lines(self.cleaned_data["grants"])

    def clean_trust(self) -> str:
        return str(self.cleaned_data.get("trust") or "trusted")


class ReconcileKeyForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        required=False,
        help_text="Who uses the URL, e.g. “OpenRefine, seeding team”.",
    )
    scope = forms.CharField(
        max_length=300,
        initial="*",
        help_text="The scopes it may read: * for every scope, P/* for P and below, P for P alone.",
    )


class MemoryImportForm(forms.Form):
    file = forms.FileField(
        help_text="A memory export (JSON lines), or a mem0 or Graphiti export (JSON)."
    )
    format = forms.ChoiceField(
        choices=[
            ("memory", "Memory Desk export"),
            ("mem0", "mem0 export"),
            ("graphiti", "Graphiti export"),
        ],
        initial="memory",
    )

    def clean_file(self) -> str:
        return _read_text(self.cleaned_data["file"], MAX_MEMORY_IMPORT_BYTES)
