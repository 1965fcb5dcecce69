"""Which Chromium the browser tests drive, or one message saying how to get one."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

# Debian's package first (what CI installs), then one on PATH, then Playwright's own.
SYSTEM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
PATH_NAMES = ("chromium", "chromium-browser", "google-chrome")

INSTALL_HINT = (
    "The browser tests need Chromium and found none. Install one of:\n"
    "  sudo apt-get install chromium          (Debian/Ubuntu; .ci/run does this)\n"
    "  .venv/bin/playwright install chromium  (Playwright's own build)\n"
    "or point MEMORY_CHROMIUM at a Chromium or Chrome executable."
)


class ChromiumNotFound(RuntimeError):
    pass


def find_chromium(
    playwright_executable: str | None, system_candidates: tuple[str, ...] = SYSTEM_CANDIDATES
) -> str:
    """The executable to launch: $MEMORY_CHROMIUM if set, else the first that exists."""
    chosen = os.environ.get("MEMORY_CHROMIUM")
    if chosen:
        if Path(chosen).is_file() and os.access(chosen, os.X_OK):
            return chosen
        raise ChromiumNotFound(
            f"MEMORY_CHROMIUM={chosen} is not an executable file.\n{INSTALL_HINT}"
        )
    for candidate in system_candidates:
        if Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    for name in PATH_NAMES:
        found = shutil.which(name)
        if found:
            return found
    if playwright_executable and Path(playwright_executable).is_file():
        return playwright_executable
    raise ChromiumNotFound(INSTALL_HINT)
