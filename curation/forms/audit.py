"""The audit log page's filter."""

from __future__ import annotations

from django import forms


class AuditFilterForm(forms.Form):
    action = forms.CharField(max_length=50, required=False)
