"""Items become a fifth search target: ``SearchDoc.item`` and the one-target check."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0018_items"),
        ("search", "0006_document_context_checked_through_its_record"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="searchdoc",
            name="search_doc_one_target",
        ),
        migrations.AddField(
            model_name="searchdoc",
            name="item",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="memory.item",
            ),
        ),
        migrations.AlterField(
            model_name="searchdoc",
            name="target",
            field=models.CharField(
                choices=[
                    ("chunk", "Chunk"),
                    ("fact", "Fact"),
                    ("entity", "Entity"),
                    ("turn", "Turn"),
                    ("item", "Item"),
                ],
                max_length=6,
            ),
        ),
        migrations.AlterField(
            model_name="searchstats",
            name="target",
            field=models.CharField(
                choices=[
                    ("chunk", "Chunk"),
                    ("fact", "Fact"),
                    ("entity", "Entity"),
                    ("turn", "Turn"),
                    ("item", "Item"),
                ],
                max_length=6,
            ),
        ),
        migrations.AlterField(
            model_name="searchterm",
            name="target",
            field=models.CharField(
                choices=[
                    ("chunk", "Chunk"),
                    ("fact", "Fact"),
                    ("entity", "Entity"),
                    ("turn", "Turn"),
                    ("item", "Item"),
                ],
                max_length=6,
            ),
        ),
        migrations.AddConstraint(
            model_name="searchdoc",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(
                        ("chunk__isnull", False),
                        ("entity__isnull", True),
                        ("fact__isnull", True),
                        ("item__isnull", True),
                        ("target", "chunk"),
                        ("turn__isnull", True),
                    ),
                    models.Q(
                        ("chunk__isnull", True),
                        ("entity__isnull", True),
                        ("fact__isnull", False),
                        ("item__isnull", True),
                        ("target", "fact"),
                        ("turn__isnull", True),
                    ),
                    models.Q(
                        ("chunk__isnull", True),
                        ("entity__isnull", False),
                        ("fact__isnull", True),
                        ("item__isnull", True),
                        ("target", "entity"),
                        ("turn__isnull", True),
                    ),
                    models.Q(
                        ("chunk__isnull", True),
                        ("entity__isnull", True),
                        ("fact__isnull", True),
                        ("item__isnull", True),
                        ("target", "turn"),
                        ("turn__isnull", False),
                    ),
                    models.Q(
                        ("chunk__isnull", True),
                        ("entity__isnull", True),
                        ("fact__isnull", True),
                        ("item__isnull", False),
                        ("target", "item"),
                        ("turn__isnull", True),
                    ),
                    _connector="OR",
                ),
                name="search_doc_one_target",
            ),
        ),
        migrations.AddConstraint(
            model_name="searchdoc",
            constraint=models.UniqueConstraint(
                condition=models.Q(("item__isnull", False)),
                fields=("item",),
                name="search_doc_one_per_item",
            ),
        ),
    ]
