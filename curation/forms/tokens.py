"""The tokens page's forms: an API token for a member, a reconciliation key."""

from __future__ import annotations

from typing import Any

from django import forms

from curation.forms.fields import lines_split


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
        return lines_split(self.cleaned_data["grants"])

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
