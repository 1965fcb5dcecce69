"""Items drop two indexes a put wrote for nothing: the context's (every item index leads
with the context) and the run's, now partial (only the items that have a run)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0025_item_turn_context_item_extract"),
    ]

    operations = [
        migrations.AlterField(
            model_name="item",
            name="context",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="memory.context",
            ),
        ),
        migrations.AlterField(
            model_name="item",
            name="run",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="memory.run",
            ),
        ),
        migrations.AddIndex(
            model_name="item",
            index=models.Index(
                condition=models.Q(("run__isnull", False)), fields=["run"], name="item_run"
            ),
        ),
    ]
