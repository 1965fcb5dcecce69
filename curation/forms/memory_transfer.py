"""The memory page's import form: an export of this or another memory, uploaded."""

from __future__ import annotations

from django import forms

from curation.forms.fields import text_read
from memory.services.transfer.jobs import MAX_MEMORY_IMPORT_BYTES


class MemoryImportForm(forms.Form):
    file = forms.FileField(
        help_text="A memory export (JSON lines), or a mem0 or Graphiti export (JSON)."
    )
    format = forms.ChoiceField(
        choices=[
            ("memory", "Memory Desk export"),
            ("mem0", "mem0 export"),
            ("graphiti", "Graphiti export"),
        ],
        initial="memory",
    )

    def clean_file(self) -> str:
        return text_read(self.cleaned_data["file"], MAX_MEMORY_IMPORT_BYTES)
