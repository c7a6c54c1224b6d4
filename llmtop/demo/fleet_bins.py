"""Fetch Debian's real Prometheus, promtool and VictoriaMetrics for ``llmtop demo fleet``.

A ``pip install`` has no Prometheus. Where ``apt-get`` and ``dpkg`` are there (Debian,
Ubuntu), :func:`fetch` downloads the distribution's ``prometheus`` and ``victoria-metrics``
packages with ``apt-get download`` and unpacks their binaries with ``dpkg -x`` into llmtop's
cache folder (:func:`cache_dir`): nothing is installed system-wide, no service starts. Without
root, apt's package lists go in a private folder. ``scripts/fleet_servers.sh`` runs this
module for CI and the tests. Standard library and :mod:`llmtop.children` only.

``python -m llmtop.demo.fleet_bins [--dest DIR]`` fetches and prints the folder.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import sys
from collections.abc import Callable

from llmtop import children
from llmtop.errors import LlmtopError

__all__ = ["BINARIES", "PACKAGES", "blocker", "cache_dir", "fetch", "have_all"]

BINARIES = ("prometheus", "promtool", "victoria-metrics")
PACKAGES = ("prometheus", "victoria-metrics")
SIZE_HINT = "about 60 MB"
"""What the two packages weigh (Debian 12: prometheus 2.42 ~38 MB, victoria-metrics ~21 MB)."""


def cache_dir() -> str:
    """``$LLMTOP_FLEET_BIN_DIR``, else ``$XDG_CACHE_HOME/llmtop/fleet-bin`` (~/.cache/...)."""
    explicit = os.environ.get("LLMTOP_FLEET_BIN_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "llmtop", "fleet-bin")


def have_all(dest: str) -> bool:
    """True when every binary is in ``dest`` and executable."""
    return all(os.access(os.path.join(dest, b), os.X_OK) for b in BINARIES)


def blocker() -> str | None:
    """Why :func:`fetch` cannot work on this machine (None: it can try)."""
    missing = [t for t in ("apt-get", "dpkg") if shutil.which(t) is None]
    if missing:
        return f"{' and '.join(missing)} not found (not a Debian or Ubuntu machine)"
    return None


def _run(argv: list[str], workdir: str, log: str) -> None:
    """Run one command to its end through :mod:`llmtop.children`; raise with its log tail."""
    child = children.spawn(argv, cwd=workdir, log_path=log)
    code = child.proc.wait()
    child.stop(timeout_s=0)
    if code != 0:
        raise LlmtopError(f"{' '.join(argv[:2])} … failed (exit {code}): {child.tail(8)}")


def fetch(dest: str | None = None, progress: Callable[[str], None] | None = None) -> str:
    """Download and unpack the binaries into ``dest`` (default :func:`cache_dir`).

    Returns the folder. Does nothing when they are already there. Raises
    :class:`LlmtopError` with the reason (no apt, no network, no such package).
    """
    dest = dest or cache_dir()
    say = progress or (lambda _line: None)
    if have_all(dest):
        return dest
    why = blocker()
    if why:
        raise LlmtopError(f"cannot fetch Prometheus: {why}")
    os.makedirs(dest, exist_ok=True)
    work = children.temp_dir("llmtop-fleet-bins-")
    try:
        os.chmod(work, 0o755)  # apt's sandbox user (_apt) writes the .deb files here
        log = os.path.join(work, "apt.log")
        user = ["-o", f"APT::Sandbox::User={_user()}"]
        say(f"fetching Debian's {' and '.join(PACKAGES)} packages ({SIZE_HINT}) into {dest}")
        try:
            _run(["apt-get", "-q", *user, "download", *PACKAGES], work, log)
        except LlmtopError:
            extra = _private_state(work) if os.geteuid() != 0 else []
            say("apt-get update (package lists)" + (" in a private folder" if extra else ""))
            _run(["apt-get", "-q", *user, *extra, "update"], work, log)
            _run(["apt-get", "-q", *user, *extra, "download", *PACKAGES], work, log)
        root = os.path.join(work, "root")
        for deb in sorted(glob.glob(os.path.join(work, "*.deb"))):
            _run(["dpkg", "-x", deb, root], work, log)
        for name in BINARIES:
            src = os.path.join(root, "usr", "bin", name)
            if not os.path.isfile(src):
                raise LlmtopError(f"the packages held no {name} binary")
            tmp = os.path.join(dest, f".{name}.tmp")
            shutil.copyfile(src, tmp)
            os.chmod(tmp, 0o755)
            os.replace(tmp, os.path.join(dest, name))
        say(f"done: {', '.join(BINARIES)} in {dest}")
        return dest
    finally:
        children.remove_temp_dir(work)


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):  # pragma: no cover - no passwd entry
        return "root"


def _private_state(work: str) -> list[str]:
    """apt options that keep lists and cache in ``work`` (an update without root)."""
    state = os.path.join(work, "apt")
    for sub in ("lists/partial", "cache/archives/partial"):
        os.makedirs(os.path.join(state, sub), exist_ok=True)
    return ["-o", f"Dir::State::Lists={state}/lists", "-o", f"Dir::Cache={state}/cache",
            "-o", "Debug::NoLocking=1"]


def main(argv: list[str] | None = None) -> int:
    """``python -m llmtop.demo.fleet_bins [--dest DIR]``: fetch, print the folder."""
    p = argparse.ArgumentParser(prog="python -m llmtop.demo.fleet_bins", description=__doc__)
    p.add_argument("--dest", default=None, help=f"folder (default {cache_dir()})")
    args = p.parse_args(argv)
    try:
        print(fetch(args.dest, progress=lambda line: print(line, file=sys.stderr)))
    except LlmtopError as exc:
        print(f"fleet_bins: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
