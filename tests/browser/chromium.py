"""Which Chromium the browser tests drive: one already on the machine, else Debian's
``chromium`` package fetched once into ``var/chromium/`` (no root needed), else one
message saying why not and how to get one."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

# Debian's package first (what an admin installs), then one on PATH, then Playwright's own.
SYSTEM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
PATH_NAMES = ("chromium", "chromium-browser", "google-chrome")
# Inside the fetched folder: the launcher script the tests run, and the files dpkg unpacked.
LAUNCHER = "chromium"
UNPACKED = "root"
BINARY = Path("usr/lib/chromium/chromium")

INSTALL_HINT = (
    "The browser tests need Chromium and found none. Install one of:\n"
    "  sudo apt-get install chromium          (Debian)\n"
    "  .venv/bin/playwright install chromium  (Playwright's own build)\n"
    "or point MEMORY_CHROMIUM at a Chromium or Chrome executable."
)


class ChromiumNotFound(RuntimeError):
    pass


def _executable(path: str | Path) -> bool:
    return Path(path).is_file() and os.access(path, os.X_OK)


def find_chromium(
    playwright_executable: str | None,
    system_candidates: tuple[str, ...] = SYSTEM_CANDIDATES,
    fetched: Path | None = None,
) -> str:
    """The executable to launch: $MEMORY_CHROMIUM if set, else the first that exists of
    the system's, one on PATH, one fetched earlier into ``fetched``, Playwright's own."""
    chosen = os.environ.get("MEMORY_CHROMIUM")
    if chosen:
        if _executable(chosen):
            return chosen
        raise ChromiumNotFound(
            f"MEMORY_CHROMIUM={chosen} is not an executable file.\n{INSTALL_HINT}"
        )
    for candidate in system_candidates:
        if _executable(candidate):
            return candidate
    for name in PATH_NAMES:
        found = shutil.which(name)
        if found:
            return found
    if fetched is not None and _executable(fetched / LAUNCHER):
        return str(fetched / LAUNCHER)
    if playwright_executable and Path(playwright_executable).is_file():
        return playwright_executable
    raise ChromiumNotFound(INSTALL_HINT)


def chromium_for_tests(
    playwright_executable: str | None, folder: Path, say: Callable[[str], None] = print
) -> str:
    """``find_chromium``, and when there is none (and MEMORY_CHROMIUM is unset), Debian's
    package fetched into ``folder`` — once: later runs find it there."""
    try:
        found = find_chromium(playwright_executable, fetched=folder)
    except ChromiumNotFound:
        if os.environ.get("MEMORY_CHROMIUM"):
            raise
    else:
        if found != str(folder / LAUNCHER) or _runs(found):
            return found
        say(f"The Chromium in {folder} no longer starts; fetching it again.")
    return fetch_debian_chromium(folder, say)


def _runs(launcher: str) -> bool:
    try:
        done = subprocess.run([launcher, "--version"], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and b"Chromium" in done.stdout


class _Apt:
    """apt-get with its package lists and cache in a folder of its own: it needs no root,
    leaves the system's state alone and never reads stale system lists."""

    def __init__(self, state: Path) -> None:
        (state / "lists" / "partial").mkdir(parents=True, exist_ok=True)
        (state / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
        self.options = [
            "-q",
            "-o",
            f"Dir::State::Lists={state / 'lists'}",
            "-o",
            f"Dir::Cache={state / 'cache'}",
            "-o",
            "Debug::NoLocking=1",
        ]
        if os.geteuid() == 0:  # root: no hand-over to the _apt user, who cannot write here
            self.options += ["-o", "APT::Sandbox::User=root"]

    def run(
        self, step: str, *args: str, cwd: Path | None = None, timeout: int = 600, before: str = ""
    ) -> str:
        """apt-get's output (both streams); when it fails, ChromiumNotFound naming
        ``step`` after what ``before`` says (an update's warnings)."""
        try:
            done = subprocess.run(
                ["apt-get", *self.options, *args],
                cwd=cwd,
                capture_output=True,
                text=True,
                timeout=timeout,
                env={**os.environ, "LC_ALL": "C"},
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise ChromiumNotFound(_failed(step, str(error))) from error
        if done.returncode != 0:
            said = f"{before.strip()}\n{done.stderr or done.stdout}".strip()
            raise ChromiumNotFound(_failed(step, said[-2000:]))
        return done.stdout + done.stderr


def _failed(step: str, detail: str) -> str:
    return (
        f"No Chromium on this machine, and fetching Debian's chromium package failed "
        f"at {step}:\n{detail.strip()}\n\n{INSTALL_HINT}"
    )


def fetch_debian_chromium(folder: Path, say: Callable[[str], None] = print) -> str:
    """Download Debian's ``chromium`` and the libraries it needs that this machine lacks
    (``apt-get download``) and unpack them into ``folder`` (``dpkg-deb -x``); return a
    launcher script that points the loader at the unpacked libraries."""
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise ChromiumNotFound(
            "No Chromium on this machine, and it cannot be fetched: apt-get and dpkg-deb "
            f"(Debian) are not here.\n{INSTALL_HINT}"
        )
    folder.mkdir(parents=True, exist_ok=True)
    with (folder.parent / f".{folder.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test run may be fetching it right now
        launcher = folder / LAUNCHER
        if _executable(launcher) and _runs(str(launcher)):
            return str(launcher)
        say(
            f"No Chromium on this machine: fetching Debian's chromium package into {folder} "
            "(100–200 MB, once; later runs reuse it)."
        )
        apt = _Apt(folder / "apt")
        # apt-get update exits 0 when it reaches no archive; its warnings say so, and they
        # go with any failure of the planning that follows.
        updated = apt.run("apt-get update (is the Debian archive reachable?)", "update")
        warnings = "\n".join(line for line in updated.splitlines() if line.startswith(("W:", "E:")))
        plan = apt.run(
            "apt-get install --simulate",
            "install",
            "--simulate",
            "--no-install-recommends",
            "chromium",
            before=warnings,
        )
        packages = [line.split()[1] for line in plan.splitlines() if line.startswith("Inst ")]
        if "chromium" not in packages:
            raise ChromiumNotFound(_failed("planning", "apt-get plans no chromium:\n" + plan))
        with tempfile.TemporaryDirectory(dir=folder) as work:
            debs = Path(work) / "debs"
            debs.mkdir()
            apt.run("apt-get download", "download", *packages, cwd=debs, timeout=1800)
            unpacked = Path(work) / UNPACKED
            for deb in sorted(debs.glob("*.deb")):
                try:
                    subprocess.run(
                        ["dpkg-deb", "-x", str(deb), str(unpacked)],
                        check=True,
                        capture_output=True,
                        timeout=600,
                    )
                except subprocess.CalledProcessError as error:
                    raise ChromiumNotFound(
                        _failed(f"dpkg-deb -x {deb.name}", error.stderr.decode())
                    ) from error
            shutil.rmtree(folder / UNPACKED, ignore_errors=True)
            unpacked.rename(folder / UNPACKED)
        shutil.rmtree(folder / "apt", ignore_errors=True)  # the next fetch updates afresh
        _write_launcher(folder)
        if not _runs(str(launcher)):
            check = subprocess.run([str(launcher), "--version"], capture_output=True, text=True)
            raise ChromiumNotFound(_failed("its first start", check.stderr[-1500:]))
        say(f"Chromium is in {folder} ({len(packages)} packages unpacked).")
        return str(launcher)


def _write_launcher(folder: Path) -> None:
    root = (folder / UNPACKED).resolve()
    libraries = sorted({str(p.parent) for p in root.rglob("*.so*") if p.is_file()})
    fonts = folder / "fonts.conf"
    system = '<include ignore_missing="yes">/etc/fonts/fonts.conf</include>'
    fonts.write_text(
        '<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig>\n'
        f"  {system}\n  <dir>/usr/share/fonts</dir>\n  <dir>{root}/usr/share/fonts</dir>\n"
        f"  <cachedir>{folder.resolve()}/fontconfig-cache</cachedir>\n</fontconfig>\n"
    )
    launcher = folder / LAUNCHER
    launcher.write_text(
        "#!/bin/sh\n"
        "# Debian's Chromium unpacked beside this script, with the libraries it brought.\n"
        f'export LD_LIBRARY_PATH="{":".join(libraries)}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"\n'
        f'export FONTCONFIG_FILE="{fonts.resolve()}"\n'
        f'exec "{root / BINARY}" "$@"\n'
    )
    launcher.chmod(0o755)
