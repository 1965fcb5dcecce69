"""The seeding page's forms: one entity typed in, or a file of them uploaded."""

from __future__ import annotations

from django import forms

from curation.forms.entities import EntityFieldsForm, identifiers_parse
from curation.forms.fields import scope_clean, text_read
from memory.services.transfer.seeding import MAX_IMPORT_BYTES


class EntitySeedForm(EntityFieldsForm):
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
        return scope_clean(self.cleaned_data["scope"])

    def clean_identifiers(self) -> list[dict[str, str]]:
        return identifiers_parse(self.cleaned_data["identifiers"])


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
        return text_read(self.cleaned_data["file"], MAX_IMPORT_BYTES)

    def clean_scope_default(self) -> str:
        scope: str = self.cleaned_data["scope_default"]
        return scope_clean(scope) if scope.strip() else ""
