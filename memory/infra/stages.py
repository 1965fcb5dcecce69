"""Where a run's time goes: milliseconds per named stage.

An ingest run owns a ``StageClock``; code anywhere below it (the duplicate check, the
search postings, the fact writer) marks its share with ``stage(name)``, which does
nothing when no clock is running. Each stage counts its own time only: a stage nested
in another is subtracted from it, so the stages add up to the time they cover.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar

_running: ContextVar[StageClock | None] = ContextVar("stage_clock", default=None)


class StageClock:
    """Milliseconds per stage of a run (exclusive of the stages nested in it)."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.stages: dict[str, float] = {}
        self._nested_ms: list[float] = []  # per open stage: time of the stages inside it

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        began = time.perf_counter()
        token = _running.set(self)
        self._nested_ms.append(0.0)
        try:
            yield
        finally:
            _running.reset(token)
            elapsed = (time.perf_counter() - began) * 1000
            inside = self._nested_ms.pop()
            if self._nested_ms:
                self._nested_ms[-1] += elapsed
            key = f"{name}_ms"
            self.stages[key] = round(self.stages.get(key, 0.0) + elapsed - inside, 1)

    def timings(self) -> dict[str, float]:
        return {**self.stages, "total_ms": round((time.perf_counter() - self.started) * 1000, 1)}


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    """Count the block as stage ``name`` of the running clock, if any."""
    clock = _running.get()
    if clock is None:
        yield
        return
    with clock.stage(name):
        yield
