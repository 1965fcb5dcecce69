"""The entities pages' forms: the list's filters and an entity's edit (the fields a
seeded entity shares with it are ``EntityFieldsForm``)."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from curation.forms.fields import ENTITY_TYPE_CHOICES, lines_split, scope_clean


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
        return scope_clean(scope) if scope.strip() else ""

    def filters(self) -> dict[str, Any]:
        data = self.cleaned_data
        seeded = {"yes": True, "no": False}.get(data.get("seeded") or "")
        return {
            "q": data.get("q") or None,
            "type": data.get("type") or None,
            "scope": data.get("scope") or None,
            "seeded": seeded,
        }


class EntityFieldsForm(forms.Form):
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
        return lines_split(self.cleaned_data["aliases"])

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


def identifiers_parse(raw: str) -> list[dict[str, str]]:
    items = []
    for part in lines_split(raw):
        kind, sep, value = part.partition(":")
        if not sep or not kind.strip() or not value.strip():
            raise ValidationError(f"{part[:60]!r} must look like kind:value (email:a@b.c)")
        items.append({"kind": kind.strip(), "value": value.strip()})
    return items


class EntityEditForm(EntityFieldsForm):
    identifiers_add = forms.CharField(
        required=False,
        label="Add identifiers",
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="kind:value, one per line (email:alex@acme.com).",
    )

    def clean_identifiers_add(self) -> list[dict[str, str]]:
        return identifiers_parse(self.cleaned_data["identifiers_add"])
