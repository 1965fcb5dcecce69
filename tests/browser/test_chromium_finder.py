"""The browser tests find a Chromium, or fail once, plainly, saying how to install one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from tests.browser.chromium import INSTALL_HINT, ChromiumNotFound, find_chromium


def _executable(path: Path) -> str:
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return str(path)


def test_playwrights_own_chromium_is_used_when_no_system_one_is_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMORY_CHROMIUM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    bundled = _executable(tmp_path / "chrome")
    assert find_chromium(bundled, system_candidates=()) == bundled


def test_no_chromium_anywhere_raises_the_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMORY_CHROMIUM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ChromiumNotFound) as missing:
        find_chromium(str(tmp_path / "not-installed"), system_candidates=())
    assert "apt-get install chromium" in str(missing.value)
    assert "playwright install chromium" in str(missing.value)


def test_a_browser_test_without_chromium_fails_with_the_hint_not_a_launch_error() -> None:
    env = {**os.environ, "MEMORY_CHROMIUM": "/nonexistent/chromium"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/browser/test_csp.py",
            "-x",
        ],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode != 0
    assert INSTALL_HINT.splitlines()[1].strip() in result.stdout
    assert "BrowserType.launch" not in result.stdout
    assert "Traceback" not in result.stdout
