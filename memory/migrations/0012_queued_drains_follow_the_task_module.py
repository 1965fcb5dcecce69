"""The embedding drain task moved from ``memory.search.tasks`` to ``memory.tasks``: drains
already waiting in the queue follow it, so the worker can still import them."""

from django.db import migrations

OLD_PATH = "memory.search.tasks.embeddings_drain_task"
NEW_PATH = "memory.tasks.embeddings_drain_task"


def _move(old: str, new: str):
    def move(apps, schema_editor):
        DBTaskResult = apps.get_model("django_tasks_database", "DBTaskResult")
        DBTaskResult.objects.filter(task_path=old, status="READY").update(task_path=new)

    return move


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0011_run_retract_and_warnings"),
        ("django_tasks_database", "0021_conditional_partial_index_ordering"),
    ]

    operations = [migrations.RunPython(_move(OLD_PATH, NEW_PATH), _move(NEW_PATH, OLD_PATH))]
