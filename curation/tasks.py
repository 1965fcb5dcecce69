"""The dashboard's background work on the django-tasks queue (``manage.py db_worker``)."""

from __future__ import annotations

from django_tasks import task

# Someone is watching an import's progress bar; embedding tasks can wait behind it.
IMPORT_PRIORITY = 10


@task(priority=IMPORT_PRIORITY)
def import_job_task(job_id: int) -> str:
    """Import one uploaded seeding file (``curation.services.import_job_execute``).

    Jobs left ``running`` by a worker that died are failed first, so they can be retried.
    """
    # Imported here: the services module enqueues this task.
    from curation.services import import_job_execute, import_jobs_recover_stale

    import_jobs_recover_stale()
    return import_job_execute(job_id=job_id)
