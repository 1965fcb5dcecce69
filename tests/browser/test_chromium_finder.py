"""The browser tests find a Chromium, fetch Debian's when there is none, or fail once,
plainly, saying why and how to install one. (The fetch itself runs for real in any browser
test on a machine without Chromium.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from tests.browser.chromium import (
    INSTALL_HINT,
    LAUNCHER,
    ChromiumNotFound,
    chromium_for_tests,
    fetch_debian_chromium,
    find_chromium,
)


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


def test_one_fetched_earlier_is_used_before_playwrights_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMORY_CHROMIUM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    fetched = tmp_path / "var-chromium"
    fetched.mkdir()
    launcher = _executable(fetched / LAUNCHER)
    bundled = _executable(tmp_path / "chrome")
    assert find_chromium(bundled, system_candidates=(), fetched=fetched) == launcher


def test_without_apt_the_fetch_says_so_and_how_to_install_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ChromiumNotFound) as missing:
        fetch_debian_chromium(tmp_path / "chromium", say=lambda line: None)
    assert "apt-get and dpkg-deb" in str(missing.value)
    assert "playwright install chromium" in str(missing.value)
    assert not (tmp_path / "chromium").exists()


def test_a_named_chromium_that_is_missing_is_not_replaced_by_a_fetch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORY_CHROMIUM", str(tmp_path / "nowhere"))
    with pytest.raises(ChromiumNotFound, match="MEMORY_CHROMIUM="):
        chromium_for_tests(None, tmp_path / "chromium", say=lambda line: None)
    assert not (tmp_path / "chromium").exists()


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
