"""The embedding model loads when a server starts, and the dashboard says so meanwhile."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

# A fresh process (the model is not loaded yet): gunicorn's worker hook starts the
# warm-up (the demo's _serve calls the same function), a page's notice says the model is
# loading, and once loaded the model is the one requests use.
SCRIPT = r"""
import django, os
os.environ["DJANGO_SETTINGS_MODULE"] = "memory.settings"
django.setup()
from django.template.loader import render_to_string
from memory.infra.embeddings import embedder_loading, embedder_warm_up
from memory.infra.embeddings import _embedder_for

import logging, threading
from memory import gunicorn_conf

class Worker:  # what gunicorn passes to post_worker_init: a pid and a logger
    pid = os.getpid()
    log = logging.getLogger("gunicorn.error")

gunicorn_conf.post_worker_init(Worker())
thread = next(t for t in threading.enumerate() if t.name == "embedder-warm-up")
assert embedder_loading()
NOTICE = "curation/_embedder_notice.html"
notice = render_to_string(NOTICE, {"embedder_loading": embedder_loading()})
assert "The embedding model is still loading" in notice, notice
assert embedder_warm_up() is None  # once per process
thread.join(120)
assert not embedder_loading()
assert _embedder_for.cache_info().currsize == 1  # loaded, and kept for the requests
assert render_to_string(NOTICE, {"embedder_loading": False}).strip() == ""
print("ok")
"""


def test_the_server_start_loads_the_model_in_the_background_and_pages_say_so() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=settings.BASE_DIR,
        env={**os.environ, "MEMORY_EMBED_MODEL": "local:all-MiniLM-L6-v2"},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")


# A first start builds the int8 model from the shipped weights, in a fresh process.
BUILD = r"""
import django, os, sys, tempfile
from pathlib import Path
os.environ["DJANGO_SETTINGS_MODULE"] = "memory.settings"
django.setup()
from memory.infra.onnx_embedder import onnx_model_build
onnx_model_build(Path(sys.argv[1]), int8=True, per_channel=True)
"""


def test_a_first_start_says_it_prepares_the_model_once_without_progress_bars(
    tmp_path: Path,
) -> None:
    result = subprocess.run(
        [sys.executable, "-c", BUILD, str(tmp_path)],
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    said = result.stdout + result.stderr
    assert said.count("preparing the embedding model") == 1, said
    assert "Loading weights" not in said and "pre-processing" not in said, said
    assert list(tmp_path.glob("*.int8-per-channel.onnx"))
