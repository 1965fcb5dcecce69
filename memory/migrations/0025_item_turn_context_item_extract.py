"""Items keep the turn their extraction read; contexts say whether puts extract by default;
the scope index carries the expiry."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0024_keyword_embedding_hnsw'),
    ]

    operations = [
        migrations.AddField(
            model_name='context',
            name='item_extract',
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AddField(
            model_name='item',
            name='turn',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='memory.turn'),
        ),
        migrations.AddIndex(
            model_name='item',
            index=models.Index(condition=models.Q(('turn__isnull', False)), fields=['turn'], name='item_turn'),
        ),
        # The namespace tree counts live items per scope from the index alone.
        migrations.RemoveIndex(
            model_name='item',
            name='item_scope_prefix',
        ),
        migrations.AddIndex(
            model_name='item',
            index=models.Index(fields=['context', 'scope'], include=('expires_at',), name='item_scope_live', opclasses=['int8_ops', 'varchar_pattern_ops']),
        ),
        # Items extracted before: the turn of their run, or of a retry of it.
        migrations.RunSQL(
            """
            UPDATE memory_item i SET turn_id = (
                SELECT t.id FROM memory_turn t JOIN memory_run r ON r.id = t.run_id
                WHERE r.id = i.run_id OR r.retry_of_id = i.run_id
                ORDER BY t.id LIMIT 1
            )
            WHERE i.run_id IS NOT NULL
            """,
            migrations.RunSQL.noop,
        ),
    ]
