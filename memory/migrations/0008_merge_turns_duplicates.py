"""Joins the turns branch (0007_turns) and the duplicate-scoring branch
(0007_duplicate_keys_model_explain), which were written in parallel and touch
different tables."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0007_duplicate_keys_model_explain"),
        ("memory", "0007_turns"),
    ]

    operations: list[migrations.operations.base.Operation] = []
