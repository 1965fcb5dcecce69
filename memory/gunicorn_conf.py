"""gunicorn settings for the web process (docs/DEPLOY.md):

    gunicorn -c python:memory.gunicorn_conf memory.wsgi:application

Threaded workers (``gthread``): one process per core, four threads each.
- A request spends much of its time waiting — on PostgreSQL, on the embedder (torch
  releases the GIL) — so threads overlap those waits; a process per core uses every core
  despite the GIL. More processes than cores would add memory (each loads the ~300 MB
  embedding model) and context switches, not throughput, on a machine that also runs
  PostgreSQL and a task worker.
- gthread's main loop keeps telling the arbiter it is alive while a slow request runs (an
  ingest with ``wait: true``, an LLM call of up to a minute per attempt), so ``timeout``
  only catches a stuck process; a sync worker would be killed mid-request.
- It keeps connections alive, so a load balancer or an agent reuses them.

Environment: ``WEB_CONCURRENCY`` (processes, default one per core), ``MEMORY_WEB_THREADS``
(default 4), ``MEMORY_WEB_BIND`` (default ``127.0.0.1:8000``). gunicorn's command-line
flags take precedence over this file (``--bind``, ``--workers``, ``--threads``).
"""

from __future__ import annotations

import os
from typing import Any

from memory.infra.env import env_int, env_str

wsgi_app = "memory.wsgi:application"
bind = env_str("MEMORY_WEB_BIND", "127.0.0.1:8000")
worker_class = "gthread"
workers = env_int("WEB_CONCURRENCY", os.cpu_count() or 1)
threads = env_int("MEMORY_WEB_THREADS", 4)
# A stuck process is replaced after this many seconds without a heartbeat. It also bounds
# a worker's boot, which loads the embedding model (about 10 s, more on a busy machine).
timeout = 120
graceful_timeout = 60
# Longer than a load balancer's idle timeout (60 s for nginx and most cloud balancers),
# so gunicorn never closes a connection the balancer is about to reuse.
keepalive = 75
# gunicorn ≥ 25.1 opens a control socket at a fixed path ($XDG_RUNTIME_DIR/gunicorn.ctl)
# that a second gunicorn on the same host would collide with; nothing here uses it.
control_socket_disable = True
accesslog = None
errorlog = "-"
loglevel = env_str("MEMORY_WEB_LOG_LEVEL", "info")


def post_worker_init(worker: Any) -> None:
    """Start loading the local embedding model before this process takes its first
    request, in a background thread: pages that do not need it answer at once, and the
    dashboard says the model is loading until it is ready. A failure is logged, not
    fatal: everything but vector search still works."""
    from memory.infra.embeddings import embedder_warm_up
    from memory.selectors.drift import drift_suggestions_warm

    embedder_warm_up(then=drift_suggestions_warm)
    worker.log.info("worker %s ready (the embedding model loads in the background)", worker.pid)
