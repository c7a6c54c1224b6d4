"""A GPU process's owner (``GpuProcess.user``): from the /proc stat the sampler makes anyway."""

from __future__ import annotations

import os
import pwd

from llmtop.gpu import proc as procfs
from llmtop.gpu.demo import record_from_json

ME = pwd.getpwuid(os.getuid()).pw_name


def test_read_owner_of_this_process_and_of_none():
    assert procfs.read_owner(os.getpid()) == ME
    assert procfs.read_owner(0) is None
    assert procfs.read_owner(2**22 + 12345) is None  # no such pid


def test_user_name_falls_back_to_the_uid():
    assert procfs.user_name(os.getuid()) == ME
    assert procfs.user_name(2**31 - 7) == str(2**31 - 7)


def test_demo_processes_get_their_owner():
    rec = record_from_json({"index": 0, "processes": [
        {"pid": os.getpid(), "name": "vllm (llmtop demo)", "used_bytes": 1},
        {"pid": 7, "name": "x", "user": "given"},
        {"pid": None, "name": "y"}]})
    assert [p.user for p in rec.processes] == [ME, "given", None]
    assert rec.processes[0].to_json()["user"] == ME
