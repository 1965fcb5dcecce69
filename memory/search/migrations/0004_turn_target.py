"""Turns become a fourth search target: ``SearchDoc.turn`` and the one-target check."""

import django.db.models.deletion
from django.db import migrations, models

TARGETS = [("chunk", "Chunk"), ("fact", "Fact"), ("entity", "Entity"), ("turn", "Turn")]
REF_FIELDS = ["chunk", "fact", "entity", "turn"]


def one_target() -> models.Q:
    condition = models.Q()
    for field in REF_FIELDS:
        condition |= models.Q(
            target=field, **{f"{other}__isnull": other != field for other in REF_FIELDS}
        )
    return condition


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0007_turns"),
        ("search", "0003_term_bounds"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="searchdoc", name="search_doc_one_target"),
        migrations.AddField(
            model_name="searchdoc",
            name="turn",
            field=models.OneToOneField(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="search_doc",
                to="memory.turn",
            ),
        ),
        *[
            migrations.AlterField(
                model_name=model,
                name="target",
                field=models.CharField(choices=TARGETS, max_length=6),
            )
            for model in ("searchdoc", "searchstats", "searchterm")
        ],
        migrations.AddConstraint(
            model_name="searchdoc",
            constraint=models.CheckConstraint(condition=one_target(), name="search_doc_one_target"),
        ),
    ]
