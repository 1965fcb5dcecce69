"""The conflicts page's form: how a conflict between two facts is resolved."""

from __future__ import annotations

from typing import Any

from django import forms


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
