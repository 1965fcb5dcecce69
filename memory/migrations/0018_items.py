"""Items: exact JSON values under a namespace and a key."""

import django.contrib.postgres.fields
import django.contrib.postgres.indexes
import django.db.models.deletion
import pgvector.django.indexes
import pgvector.django.vector
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0017_derived_rows_context_checked_through_their_source'),
    ]

    operations = [
        migrations.CreateModel(
            name='Item',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('namespace', django.contrib.postgres.fields.ArrayField(base_field=models.TextField(), size=None)),
                ('scope', models.CharField(max_length=300)),
                ('key', models.TextField()),
                ('value', models.JSONField()),
                ('index', models.JSONField(blank=True, null=True)),
                ('text', models.TextField(blank=True)),
                ('embedding', pgvector.django.vector.VectorField(blank=True, dimensions=384, null=True)),
                ('embedding_model', models.CharField(blank=True, max_length=100)),
                ('ttl_minutes', models.FloatField(blank=True, null=True)),
                ('expires_at', models.DateTimeField(blank=True, null=True)),
                ('created_at', models.DateTimeField()),
                ('updated_at', models.DateTimeField()),
                ('context', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory.context')),
                ('run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='memory.run')),
            ],
            options={
                'indexes': [models.Index(models.F('context'), django.contrib.postgres.indexes.OpClass('scope', name='varchar_pattern_ops'), name='item_scope_prefix'), models.Index(fields=['context', '-updated_at'], name='item_recent'), models.Index(condition=models.Q(('expires_at__isnull', False)), fields=['expires_at'], name='item_expiring'), pgvector.django.indexes.HnswIndex(ef_construction=64, fields=['embedding'], m=16, name='item_embedding_hnsw', opclasses=['vector_cosine_ops'])],
                'constraints': [models.UniqueConstraint(fields=('context', 'namespace', 'key'), name='item_unique')],
            },
        ),
    ]
