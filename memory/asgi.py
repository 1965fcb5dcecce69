import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory.settings")
application = get_asgi_application()

# The URL configuration, and through it every view and service, would be imported by the
# first request: import it now, then keep what was loaded out of the collector's full
# passes (memory/infra/process.py).
from django.urls import get_resolver  # noqa: E402  (after the application is set up)

from memory.infra.process import process_settle  # noqa: E402

get_resolver().url_patterns  # noqa: B018  (the attribute loads the URLconf)
process_settle()
