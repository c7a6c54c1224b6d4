"""Discovery across network namespaces on a fake /proc: each engine read in its own
namespace, scraped at the port that publishes it or at its namespace address, once; what
cannot be read is said, with what to do."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from sources.helpers import HEADER, proc_row

from llmtop.config import Config
from llmtop.discovery import processes
from llmtop.discovery.search import discover, process_candidates
from llmtop.model import Container, EngineRow, Snapshot
from llmtop.sources import procnet

NETNS = Path(__file__).resolve().parent / "fixtures" / "netns"
HOST_NS, NS_A, NS_B = 4026531833, 4026532178, 4026532299


def real(name: str) -> str:
    """A /proc/<pid>/net file captured in a namespace (its # source: line dropped)."""
    text = (NETNS / name).read_text()
    assert text.startswith("# source: ")
    return text.split("\n", 1)[1]


def trie(addr: str) -> str:
    """The captured fib_trie with the namespace's address replaced."""
    return real("fib_trie").replace("10.243.9.2", addr)


def _pid(root: Path, pid: int, argv: list[str], *, ns: int | None, inodes=(),
         tcp: str | None = None, fib: str | None = None) -> None:
    d = root / str(pid)
    (d / "fd").mkdir(parents=True)
    (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    for i, inode in enumerate(inodes):
        os.symlink(f"socket:[{inode}]", d / "fd" / str(i + 3))
    if ns is not None:
        (d / "ns").mkdir()
        os.symlink(f"net:[{ns}]", d / "ns" / "net")
    if tcp is not None:
        (d / "net").mkdir()
        (d / "net" / "tcp").write_text(tcp)
        (d / "net" / "tcp6").write_text(HEADER)
        (d / "net" / "fib_trie").write_text(fib or "")


def host_proc(root: Path, *, self_ns: bool = True) -> Path:
    (root / "net").mkdir(parents=True)
    (root / "net" / "tcp").write_text(HEADER + proc_row("0100007F:4983", "0A", 900))  # 18819
    (root / "net" / "tcp6").write_text(HEADER)
    _pid(root, 1, ["/sbin/init"], ns=HOST_NS, tcp=HEADER, fib=trie("192.0.2.2"))
    os.symlink("1", root / "self")
    if not self_ns:
        os.unlink(root / "1" / "ns" / "net")
    return root


def pod(root: Path, pid: int, ns: int | None, addr: str, inode: int, *, fd: bool = True,
        argv: list[str] | None = None) -> None:
    tcp = real("tcp").replace(" 91035 ", f" {inode} ")  # 0.0.0.0:8000 LISTEN, captured
    _pid(root, pid, argv or ["/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server",
                             "--port", "8000"],
         ns=ns, inodes=(inode,) if fd else (), tcp=tcp, fib=trie(addr))


@pytest.fixture
def names(monkeypatch):
    monkeypatch.setattr(procnet, "netns_names", lambda *a: {NS_A: "blue"})


def test_two_pods_on_port_8000_are_two_engines(tmp_path, names):
    root = host_proc(tmp_path)
    pod(root, 100, NS_A, "10.243.1.2", 501)
    pod(root, 101, NS_A, "10.243.1.2", 501)  # a forked worker holding the same socket
    pod(root, 200, NS_B, "10.243.2.2", 601)
    notes: list[str] = []
    got = process_candidates(root, "127.0.0.1", notes)
    where = sorted({(c.host, c.port, c.engine, c.certain, c.container.netns) for c in got})
    assert where == [("10.243.1.2", 8000, "vllm", True, "blue"),
                     ("10.243.2.2", 8000, "vllm", True, str(NS_B))]
    assert notes == []


def test_a_published_port_is_preferred(tmp_path, names):
    root = host_proc(tmp_path)
    pod(root, 100, NS_A, "10.243.1.2", 501)
    pod(root, 200, NS_B, "10.243.2.2", 601)
    # moby's docker-proxy command line (libnetwork/portmapper/proxy_linux.go)
    _pid(root, 300, ["/usr/sbin/docker-proxy", "-proto", "tcp", "-host-ip", "0.0.0.0",
                     "-host-port", "18943", "-container-ip", "10.243.2.2",
                     "-container-port", "8000"], ns=HOST_NS)
    got = {(c.host, c.port): c.container.netns for c in process_candidates(root, "127.0.0.1")}
    assert got == {("10.243.1.2", 8000): "blue", ("127.0.0.1", 18943): str(NS_B)}


def test_without_root_found_by_command_line_and_said(tmp_path, names):
    root = host_proc(tmp_path)
    pod(root, 100, None, "10.243.1.2", 501, fd=False)  # ns link and fd closed to us
    pod(root, 200, None, "10.243.2.2", 601, fd=False)
    notes: list[str] = []
    got = process_candidates(root, "127.0.0.1", notes)
    assert sorted((c.host, c.port, c.certain) for c in got) == [
        ("10.243.1.2", 8000, False), ("10.243.2.2", 8000, False)]  # probed before kept
    assert all(c.container == Container(netns=None) for c in got)
    assert notes == ["2 engine processes in other network namespaces were read without "
                     "their sockets and namespace names (found by their command lines' "
                     "ports): run as root to see which namespace each is"]


def test_unreadable_namespaces_are_said_once_with_what_to_do(tmp_path, names):
    root = host_proc(tmp_path)
    for pid, ns in ((100, NS_A), (200, NS_B)):  # another namespace, its net/ unreadable
        _pid(root, pid, ["vllm", "serve", "m", "--port", "8000"], ns=ns)
    notes: list[str] = []
    assert process_candidates(root, "127.0.0.1", notes) == []
    assert notes == ["2 engine processes in other network namespaces could not be read: "
                     "run as root, or give their addresses"]


def test_loopback_only_inside_its_namespace_is_said(tmp_path, names):
    root = host_proc(tmp_path)
    _pid(root, 100, ["vllm", "serve", "m", "--port", "8001"], ns=NS_A, inodes=(91036,),
         tcp=HEADER, fib=trie("10.243.1.2"))
    (root / "100" / "net" / "tcp6").write_text(real("tcp6"))  # [::1]:8001, captured
    notes: list[str] = []
    assert process_candidates(root, "127.0.0.1", notes) == []
    assert notes == ["1 engine in another network namespace listens on its own loopback "
                     "only, which this host cannot reach: publish the port or give the "
                     "address"]


def test_host_engines_are_unchanged(tmp_path, names):
    root = host_proc(tmp_path)
    _pid(root, 100, ["vllm", "serve", "m", "--port", "18819"], ns=HOST_NS, inodes=(900,),
         tcp=HEADER, fib=trie("192.0.2.2"))
    [c] = process_candidates(root, "127.0.0.1")
    assert (c.host, c.port, c.engine, c.container) == ("127.0.0.1", 18819, "vllm", None)


def test_demo_engine_is_recognised():
    argv = ["/venv/bin/python", "/venv/bin/llmtop", "demo", "serve", "--engines", "vllm",
            "--ports", "8000", "--host", "0.0.0.0"]
    assert processes.recognise(argv) == "vllm"
    assert processes.recognise([*argv[:4], "--engines", "vllm,sglang"]) is None
    assert processes.recognise(["python3", "-m", "llmtop", "demo", "serve"]) is None  # three
    triton = [*argv[:4], "--engines", "triton", "--ports", "18002"]
    assert processes.flag_ports("triton", triton) == (18002, ())  # not tritonserver's 8002


async def test_discover_carries_the_identity_onto_the_target(tmp_path, names):
    root = host_proc(tmp_path)
    pod(root, 100, NS_A, "10.243.1.2", 501)
    _pid(root, 300, ["docker-proxy", "-proto", "tcp", "-host-ip", "127.0.0.1", "-host-port",
                     "18943", "-container-ip", "10.243.1.2", "-container-port", "8000"],
         ns=HOST_NS)
    notes: list[str] = []
    [t] = await discover(Config(), ports=(), proc_root=root, notes=notes)
    assert (t.name, t.base_url) == ("vllm@127.0.0.1:18943", "http://127.0.0.1:18943")
    assert t.container is not None and t.container.netns == "blue" and t.container.pid == 100


def test_json_shape_of_the_container():
    c = Container("docker", "ae83", "vllm-a", None, None, "4026532178", pid=7)
    row = EngineRow(key="t|m", target="t", container=c)
    doc = Snapshot(time=1.0, window_s=1.0, engines=[row, EngineRow(key="h|", target="h")]
                   ).to_json("x")
    assert doc["engines"][0]["container"] == {"runtime": "docker", "id": "ae83",
                                             "name": "vllm-a", "pod": None,
                                             "namespace": None, "netns": "4026532178"}
    assert doc["engines"][1]["container"] is None  # the host's own network
    assert Container.from_json(json.loads(json.dumps(doc["engines"][0]["container"]))) == c
    assert Container.from_json("junk") is None


def test_once_says_what_it_could_not_read_once(monkeypatch, capsys):
    from llmtop import once

    async def found_nothing(config, notes=None, **kw):
        notes.append("2 engine processes in other network namespaces could not be read: run "
                     "as root, or give their addresses")
        return []

    monkeypatch.setattr("llmtop.discovery.search.discover", found_nothing)
    assert once.run_once(Config(), as_json=True) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["engines"] == []
    lines = err.splitlines()
    assert lines[0] == ("llmtop: 2 engine processes in other network namespaces could not be "
                        "read: run as root, or give their addresses")
    assert len([x for x in lines if "could not be read" in x]) == 1
    assert "Traceback" not in err


def _pod_row() -> EngineRow:
    c = Container("containerd", "1207db63", "vllm", "vllm-0", "prod", "4026532178")
    return EngineRow(key="vllm@10.0.0.5:8000|m", target="vllm@10.0.0.5:8000", engine="vllm",
                     engine_version="0.32.0", model="m", container=c)


def test_once_table_shows_where_it_runs():
    import io

    from llmtop.console.once_table import print_once

    out = io.StringIO()
    print_once(Snapshot(time=1.0, window_s=1.0, engines=[_pod_row()]), file=out)
    text = out.getvalue()
    assert "vllm@10.0.0.5:8000" in text and "pod prod/vllm-0" in text


def test_exporter_info_carries_the_identity():
    from llmtop.export.view import View, build

    snap = Snapshot(time=1.0, window_s=10.0, engines=[_pod_row()])
    [info] = [m for m in build(View("x", "direct", snap)) if m.name == "llmtop_engine_info"]
    [sample] = info.samples
    assert sample.labels == {"target": "vllm@10.0.0.5:8000", "engine": "vllm", "model": "m",
                             "version": "0.32.0", "container_runtime": "containerd",
                             "container": "vllm", "pod": "vllm-0", "pod_namespace": "prod",
                             "netns": "4026532178"}
