"""The documents page's forms: the list's filters and a document added by hand."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError

from curation.forms.fields import scope_clean, text_read


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
        return scope_clean(scope) if scope.strip() else ""

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
        return scope_clean(self.cleaned_data["scope"])

    def clean_file(self) -> str:
        upload = self.cleaned_data.get("file")
        return text_read(upload, settings.MEMORY_MAX_TEXT_BYTES) if upload else ""

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        typed, uploaded = (data.get("text") or "").strip(), data.get("file") or ""
        if typed and uploaded:
            raise ValidationError("Paste the text or choose a file, not both.")
        if not typed and not uploaded:
            raise ValidationError("Paste the document's text or choose a text file.")
        data["content"] = uploaded or data["text"]
        return data
