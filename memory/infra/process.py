"""What a process has loaded, kept out of the garbage collector's full passes.

CPython's collector scans every tracked object on a full (oldest-generation) pass, and
a write allocates enough to set one off: a 2,000-fact turn triggered one a run, which
scanned the loaded modules (Django, the models, the OpenAI SDK's hundreds of pydantic
classes) and took a fifth of the run. Objects frozen with ``gc.freeze`` are never
scanned again; they are the ones that live as long as the process anyway
(docs/decisions/0105).

Two moments: ``django.setup()`` (the app registry's ``ready``: what every process
loads) and the end of a process's first unit of work (``process_settle``: the modules
its work imports on first use, after one collection so that no garbage is frozen).
"""

from __future__ import annotations

import gc
import threading

_settled = threading.Event()
_settling = threading.Lock()


def process_freeze_loaded() -> None:
    """Freeze what is loaded now (at start-up, where no garbage has been made yet)."""
    gc.freeze()


def process_settle() -> None:
    """Once per process, after its first unit of work (or once it has imported what its
    work needs): collect garbage, then freeze every object that survives. Later calls
    return at once."""
    if _settled.is_set():
        return
    with _settling:
        if _settled.is_set():
            return
        gc.collect()
        gc.freeze()
        _settled.set()
