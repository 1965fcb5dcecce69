"""Joins the inverse-alias branch (0009_merge_predicate_alias_inverse) and the import
jobs' move into the engine (0009_merge_0007_importjob_…), written in parallel."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0009_merge_0007_importjob_0008_merge_turns_duplicates"),
        ("memory", "0009_merge_predicate_alias_inverse"),
    ]

    operations: list[migrations.operations.base.Operation] = []
