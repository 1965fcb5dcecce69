"""The drift page's forms: resolve one observed predicate, or several at once."""

from __future__ import annotations

from typing import Any

from django import forms


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
