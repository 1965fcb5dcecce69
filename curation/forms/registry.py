"""The registry page's forms: a predicate's definition (also used to promote a drift
item), an alias, a flag, the registry file import and the list's filter."""

from __future__ import annotations

import json
import re
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from curation.forms.fields import ENTITY_TYPE_CHOICES, text_read
from memory.kernel.errors import ValidationFailed
from memory.models import Predicate, PredicateKind
from memory.models.predicate import Lifecycle
from memory.services.registry.file import PredicateEntry, registry_file_parse

MAX_REGISTRY_FILE_BYTES = 2 * 1024 * 1024


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
        text = text_read(self.cleaned_data["file"], MAX_REGISTRY_FILE_BYTES)
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
