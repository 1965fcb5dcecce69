"""The duplicates page's form: a cluster as the page posts it, for a merge, a preview
or a dismissal."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from memory.domain.entity_names import MAX_NAME_LENGTH
from memory.services.merges.plan import MAX_MERGED

MAX_CLUSTER_SIZE = MAX_MERGED + 1  # a survivor and the entities merged into it


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
