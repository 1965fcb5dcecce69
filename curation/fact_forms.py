"""The facts pages' forms: the list's filters, and a fact's correction and edit. They
check the shape of input; the services decide what it means."""

from __future__ import annotations

from datetime import UTC, datetime, time
from typing import Any

from django import forms

from memory.models import Fact, FactKind, FactStatus, SourceKind
from memory.models.turn import MAX_THREAD_CHARS
from memory.selectors.fact_pages import SORTS, FactFilters
from memory.services.facts.edit import FactEdit

DATE = forms.DateInput(attrs={"type": "date"})


class FactFilterForm(forms.Form):
    text = forms.CharField(
        max_length=200,
        required=False,
        label="Words",
        widget=forms.TextInput(attrs={"type": "search", "placeholder": "Words in the fact"}),
    )
    predicate = forms.CharField(
        max_length=100,
        required=False,
        widget=forms.TextInput(attrs={"placeholder": "any form: worksAt, employs"}),
    )
    subject = forms.CharField(
        max_length=200, required=False, widget=forms.TextInput(attrs={"placeholder": "Name"})
    )
    object = forms.CharField(
        max_length=200, required=False, widget=forms.TextInput(attrs={"placeholder": "Name"})
    )
    kind = forms.ChoiceField(choices=[("", "Any kind"), *FactKind.choices], required=False)
    status = forms.ChoiceField(choices=[("", "Any status"), *FactStatus.choices], required=False)
    source_kind = forms.ChoiceField(
        choices=[("", "Any source"), *SourceKind.choices], required=False, label="Source"
    )
    run = forms.IntegerField(min_value=1, max_value=2**62, required=False)
    thread = forms.CharField(max_length=MAX_THREAD_CHARS, required=False)
    confidence_below = forms.FloatField(
        min_value=0, max_value=1, required=False, label="Confidence below"
    )
    since = forms.DateField(required=False, label="Recorded since", widget=DATE)
    sort = forms.ChoiceField(
        choices=[("newest", "Newest first"), ("oldest", "Oldest first")], required=False
    )

    def filters(self) -> FactFilters:
        d = self.cleaned_data
        since = d.get("since")
        return FactFilters(
            predicate=d.get("predicate") or "",
            subject=d.get("subject") or "",
            object=d.get("object") or "",
            kind=d.get("kind") or "",
            status=d.get("status") or "",
            source_kind=d.get("source_kind") or "",
            run=d.get("run"),
            thread=d.get("thread") or "",
            confidence_below=d.get("confidence_below"),
            since=datetime.combine(since, time.min, tzinfo=UTC) if since else None,
            text=d.get("text") or "",
        )

    def sort_order(self) -> Any:
        sort = self.cleaned_data.get("sort") or "newest"
        return sort if sort in SORTS else "newest"


class FactCorrectForm(forms.Form):
    """A relation is corrected with another entity (by name or id), anything else with a
    new value."""

    value = forms.CharField(max_length=10_000, required=False, label="Correct value")
    object = forms.CharField(max_length=200, required=False, label="Correct entity")
    reason = forms.CharField(max_length=300, required=False)


def _day(value: Any) -> datetime | None:
    return datetime.combine(value, time.min, tzinfo=UTC) if value else None


class FactEditForm(forms.Form):
    predicate = forms.CharField(max_length=100, required=False)
    swap = forms.BooleanField(required=False, label="Swap subject and object")
    valid_from = forms.DateField(required=False, widget=DATE)
    valid_until = forms.DateField(required=False, widget=DATE)
    confidence = forms.FloatField(min_value=0, max_value=1, required=False)
    importance = forms.FloatField(min_value=0, max_value=1, required=False)
    reason = forms.CharField(max_length=300, required=False)

    @classmethod
    def for_fact(cls, fact: Fact) -> FactEditForm:
        return cls(
            initial={
                "predicate": fact.predicate.name,
                "valid_from": fact.valid_from.date() if fact.valid_from else None,
                "valid_until": fact.valid_until.date() if fact.valid_until else None,
                "confidence": fact.confidence,
                "importance": fact.importance,
            }
        )

    def edit(self, fact: Fact) -> FactEdit:
        """The change from ``fact`` as it is: a date left as it was stays (to the second),
        an emptied one clears."""
        d = self.cleaned_data
        valid_from, valid_until = _day(d.get("valid_from")), _day(d.get("valid_until"))

        def moved(new: datetime | None, old: datetime | None) -> datetime | None:
            same_day = new is not None and old is not None and new.date() == old.date()
            return None if same_day else new

        return FactEdit(
            predicate=d.get("predicate") or None,
            swap=bool(d.get("swap")),
            valid_from=moved(valid_from, fact.valid_from),
            valid_until=moved(valid_until, fact.valid_until),
            clear_valid_from=valid_from is None and fact.valid_from is not None,
            clear_valid_until=valid_until is None and fact.valid_until is not None,
            confidence=d.get("confidence"),
            importance=d.get("importance"),
            reason=d.get("reason") or "",
        )
