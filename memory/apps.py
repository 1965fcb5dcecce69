from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory store"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from memory.infra.process import process_freeze_loaded

        process_freeze_loaded()  # Django, the apps and their models: see memory/infra/process.py
