"""Fixtures for the GPU tests: the C stand-in for NVML (``nvml_standin.c``) under real pynvml.

- ``standin_lib``: the stand-in built with ``cc`` into a temp dir as ``libnvidia-ml.so.1``
  (once per session). Without a C compiler the tests using it skip with the reason;
  ``LLMTOP_REQUIRE_NVML_STANDIN=1`` (``.ci/run``) turns that skip into a failure.
- ``standin``: real ``pynvml`` bound to the stand-in (``pynvml.nvmlLib``, the handle its
  ``_LoadNvmlLibrary`` keeps, restored after the test) plus a ``Standin`` to write the
  script and read the library's counters.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

SOURCE = Path(__file__).parent / "nvml_standin.c"
REQUIRE = "LLMTOP_REQUIRE_NVML_STANDIN"


@pytest.fixture(scope="session")
def standin_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        reason = "no C compiler (cc or gcc) on PATH: the NVML stand-in cannot be built"
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"{reason} ({REQUIRE}=1)")
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("nvml-standin") / "libnvidia-ml.so.1"
    done = subprocess.run(
        # no SONAME: loaded by its path, glibc would otherwise answer every later
        # dlopen("libnvidia-ml.so.1") of this process (other tests) with the stand-in
        [cc, "-shared", "-fPIC", "-O1", "-Wall", "-o", str(out), str(SOURCE)],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return out


class Standin:
    """The stand-in's script (one file) and its counters."""

    def __init__(self, lib: ctypes.CDLL, script: Path):
        self.lib = lib
        self.script = script
        self.lib.standin_calls.restype = ctypes.c_long
        self.lib.standin_calls.argtypes = [ctypes.c_char_p]
        self.lib.standin_live_samples.restype = ctypes.c_long
        self._base = int(self.lib.standin_live_samples())
        """Samples a failed earlier test left allocated (the library lives for the session)."""

    def write(self, text: str) -> None:
        """Replace the script and load it now (the next ``nvmlInit`` reads it again)."""
        self.script.write_text(text)
        assert self.lib.standin_load(str(self.script).encode()) >= 0

    def calls(self, fn: str) -> int:
        """Calls of the C function ``fn`` since the script was last loaded."""
        return int(self.lib.standin_calls(fn.encode()))

    @property
    def live_samples(self) -> int:
        """GPM samples allocated by this test and not yet freed."""
        return int(self.lib.standin_live_samples()) - self._base


@pytest.fixture
def standin(standin_lib: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    import pynvml

    lib = ctypes.CDLL(str(standin_lib))
    monkeypatch.setattr(pynvml, "nvmlLib", lib)
    monkeypatch.setattr(pynvml, "_nvmlGetFunctionPointer_cache", {})
    script = tmp_path / "nvml-script.txt"
    script.write_text("")
    monkeypatch.setenv("NVML_STANDIN_SCRIPT", str(script))
    return Standin(lib, script)
