"""The demo engines' logs: the real engines' lines (checked against the real captures), read
by llmtop's own parsers as the real ones are, bounded by rotation, and no false alarm."""

from __future__ import annotations

import re
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from llmtop import clock
from llmtop.demo.logs import LogFile, SglangLog, TritonLog, VllmLog, engine_log
from llmtop.parse.logs import assembler

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "logs"
DATA = Path(__file__).resolve().parent / "data"


def _shape(line: str) -> str:
    """A line with its numbers, dates and hex addresses made alike (pids, times, ports)."""
    line = re.sub(r"0x[0-9a-f]+", "0xH", line)
    line = re.sub(r'"(GET|POST) /[^ ]*', r'"\1 /P', line)
    return re.sub(r"\d+(\.\d+)?", "N", line)


def _log(cls, tmp_path: Path, port: int = 8000, model: str = "m") -> object:
    return cls(LogFile(str(tmp_path / "e.log")), port, model)


def _events(path: Path, fmt: str) -> list:
    a = assembler(fmt)
    now = time.time()
    return a.feed(path.read_bytes(), now) + a.flush(now + 5)


def _engine(**kw) -> SimpleNamespace:
    c = {"prefill_compute_tokens": 0.0, "generation_tokens": 0.0, "preemptions": 0.0,
         "prefix_queries": 0.0, "prefix_hits": 0.0, "prompt_tokens_cached": 0.0}
    c.update(kw)
    return SimpleNamespace(stats=SimpleNamespace(c=c), running=[1, 2, 3], waiting=[],
                           kv_usage=lambda: 0.254, used_tokens=lambda: 1234)


def test_vllm_crash_is_the_captured_burst(tmp_path):
    """Each line the demo writes when its engine core dies is a line of the real capture
    (numbers aside), in the capture's order; the carriage returns of vLLM's multi-line
    record are there too."""
    log = _log(VllmLog, tmp_path)
    log.crash(in_flight=1)
    with open(tmp_path / "e.log", encoding="utf-8", newline="") as f:
        ours = f.read().split("\n")[:-1]
    with open(FIXTURES / "vllm-0.32-text-enginedead.log", encoding="utf-8", newline="") as f:
        real = f.read().split("\n")
    real_shapes = [_shape(x) for x in real]
    i = 0
    for line in ours:
        want = _shape(line)
        while i < len(real_shapes) and real_shapes[i] != want:
            i += 1
        assert i < len(real_shapes), f"not in the capture (or out of its order): {line!r}"
        i += 1
    assert sum(x.endswith("\r") for x in ours) == 7  # the traceback's lines but its last
    assert not log.up
    log.finished(SimpleNamespace(req_id=None, rid=1, finish_reason="stop", stream=True))
    assert len((tmp_path / "e.log").read_text().splitlines()) == len(ours)  # dead: silent


def test_vllm_crash_reads_as_one_engine_dead_error(tmp_path):
    log = _log(VllmLog, tmp_path)
    log.startup()
    log.crash(in_flight=2)
    ports = [x.split(" - ")[0] for x in (tmp_path / "e.log").read_text().splitlines()
             if " 500 " in x]
    assert len(ports) == 2 and len(set(ports)) == 2, ports  # two requests, two clients
    errors = [e for e in _events(tmp_path / "e.log", "vllm") if e.severity == "error"]
    assert len(errors) == 1
    assert errors[0].headline.startswith("vllm.v1.engine.exceptions.EngineDeadError: "
                                         "EngineCore encountered an issue")


def test_vllm_stats_line_is_the_real_one_with_the_simulated_numbers(tmp_path):
    real = [x for x in (DATA / "vllm-0.32-stats-lines.log").read_text().splitlines()
            if not x.startswith("#")]
    log = _log(VllmLog, tmp_path)
    clock_t0 = clock.monotonic()
    log._last_t = clock_t0 - 10.0  # 10 s since the last line
    log.periodic(_engine(prefill_compute_tokens=9650.0, generation_tokens=4790.0,
                         prefix_queries=100.0, prefix_hits=40.0))
    line = (tmp_path / "e.log").read_text().splitlines()[-1]
    # a GPU engine says GPU where the CPU build said CPU (loggers.py: kv_cache_device)
    assert _shape(line) == _shape(real[0]).replace("CPU KV", "GPU KV")
    m = re.search(r"Avg prompt throughput: ([\d.]+) tokens/s, Avg generation throughput: "
                  r"([\d.]+) tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: "
                  r"25.4%, Prefix cache hit rate: 40.0%$", line)
    assert m and 900 < float(m.group(1)) < 1000 and 450 < float(m.group(2)) < 500, line


def test_vllm_idle_writes_no_stats_line(tmp_path):
    """An idle engine's statistics go to DEBUG (loggers.py), not written at INFO."""
    log = _log(VllmLog, tmp_path)
    log.periodic(_engine())
    log.periodic(_engine())
    assert (tmp_path / "e.log").read_text() == ""


def test_vllm_preemptions_are_named_when_there_were_some(tmp_path):
    log = _log(VllmLog, tmp_path)
    log._last_t -= 10.0
    log.periodic(_engine(generation_tokens=100.0, preemptions=4.0))
    assert "Waiting: 0 reqs, Preemptions: 4, GPU KV cache usage" in (
        tmp_path / "e.log").read_text()


def test_vllm_access_lines_and_a_failed_request(tmp_path):
    """A finished request: Uvicorn's access line (the capture's shape); one that ended in an
    error: vLLM's ERROR line first, and 500 unless it was streamed."""
    real = (FIXTURES / "vllm-0.32-text-enginedead.log").read_text().splitlines()
    access = next(x for x in real if '"POST /v1/completions HTTP/1.1" 200 OK' in x)
    log = _log(VllmLog, tmp_path)
    log.finished(SimpleNamespace(req_id=None, rid=7, finish_reason="stop", stream=True))
    log.finished(SimpleNamespace(req_id="cmpl-abc", rid=8, finish_reason="error",
                                 stream=False))
    log.finished(SimpleNamespace(req_id="chatcmpl-x", rid=9, finish_reason="error",
                                 stream=True))
    lines = (tmp_path / "e.log").read_text().splitlines()
    assert _shape(lines[0]) == _shape(access)
    assert re.fullmatch(r"\(APIServer pid=\d+\) ERROR \d\d-\d\d \d\d:\d\d:\d\d "
                        r"\[serving\.py:203\] Request cmpl-abc failed with an internal error "
                        r"during generation", lines[1]), lines[1]
    assert lines[2].endswith('"POST /v1/completions HTTP/1.1" 500 Internal Server Error')
    assert lines[4].endswith('"POST /v1/chat/completions HTTP/1.1" 200 OK')
    sev = [e.severity for e in _events(tmp_path / "e.log", "vllm")]
    assert sev == ["info", "error", "info", "error", "info"]


def test_start_up_lines_are_info_and_in_the_captured_shapes(tmp_path):
    real = {_shape(x) for x in (FIXTURES / "vllm-0.32-text-enginedead.log").read_text(
        ).splitlines()}
    log = _log(VllmLog, tmp_path, model="meta-llama/Llama-3.1-8B-Instruct")
    log.startup()
    lines = (tmp_path / "e.log").read_text().splitlines()
    # the captured ones whose words say nothing of the capture's own model and flags
    for line in lines:
        if "non-default args" not in line and "max model len" not in line:
            assert _shape(line) in real, line
    assert {e.severity for e in _events(tmp_path / "e.log", "vllm")} == {"info"}


@pytest.mark.parametrize("cls,fmt,fixture", [
    (SglangLog, "sglang", "sglang-0.5.23-cpu.log"),
    (TritonLog, "triton", "triton-2.51-cpu.log"),
])
def test_sglang_and_triton_lines_read_as_info(tmp_path, cls, fmt, fixture):
    """Their start-up and periodic lines: the captured shapes (SGLang's Decode line: its
    source's words), all info by their own parsers (a healthy engine raises no alarm)."""
    log = _log(cls, tmp_path, model="tensorrt_llm")
    log.startup()
    log._last_t -= 1.0
    log.periodic(_engine(prefill_compute_tokens=600.0, generation_tokens=640.0,
                         prompt_tokens_cached=256.0))
    log.finished(SimpleNamespace(req_id=None, rid=1, finish_reason="stop", stream=True))
    log.scraped()
    lines = (tmp_path / "e.log").read_text().splitlines()
    real = {_shape(x) for x in (FIXTURES / fixture).read_text().splitlines()}
    for line in lines:
        if not line.startswith(("+", "|")) and line and "Decode batch" not in line:
            assert _shape(line.replace("cuda graph", "cpu graph")) in real or \
                "tensorrt_llm" in line, line
    events = _events(tmp_path / "e.log", fmt)
    assert events and {e.severity for e in events} == {"info"}
    if fmt == "sglang":
        eager = _engine(generation_tokens=1.0)
        eager.profile = SimpleNamespace(name="h100-llama3-8b-eager")
        log.periodic(eager)
        assert "cuda graph: False, gen throughput" in (tmp_path / "e.log").read_text()
        assert any("Decode batch, #running-req: 3, #token: 1234, token usage: 0.25, cuda "
                   "graph: True, gen throughput (token/s): 6" in x for x in lines), lines
    else:  # Triton logs no request at its default level
        assert len(lines) == 11


def test_log_file_is_bounded_by_rotation(tmp_path):
    """Past its cap the file is renamed .1 (replacing the older one): never more than two
    files of about the cap, each a whole number of lines."""
    path = tmp_path / "vllm-1.log"
    out = LogFile(str(path), cap_bytes=4096)
    for i in range(1000):
        out.write([f"INFO:     127.0.0.1:{40000 + i} - \"GET /metrics HTTP/1.1\" 200 OK"])
    out.close()
    assert out.rotations > 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vllm-1.log", "vllm-1.log.1"]
    for p in tmp_path.iterdir():
        text = p.read_text()
        assert len(text.encode()) <= 4096 + 100 and text.endswith("\n")


def test_log_file_that_cannot_be_written_costs_only_the_log(tmp_path):
    out = LogFile(str(tmp_path / "x.log"))
    out.close()
    out.write(["after close"])  # no exception: the engines go on
    assert (tmp_path / "x.log").read_text() == ""


def test_engine_log_by_kind(tmp_path):
    assert isinstance(engine_log("vllm", str(tmp_path / "a.log"), 1, "m"), VllmLog)
    assert isinstance(engine_log("sglang", str(tmp_path / "b.log"), 1, "m"), SglangLog)
    assert isinstance(engine_log("triton", str(tmp_path / "c.log"), 1, "m"), TritonLog)
    with pytest.raises(KeyError):
        engine_log("ollama", str(tmp_path / "d.log"), 1, "m")


def _lines(path: str) -> list[str]:
    return Path(path).read_text().splitlines()


async def test_down_and_back_and_restart_write_their_processes_lines(demo_factory, tmp_path):
    """``down``: the crash burst, silence while the port is closed, then a new process's
    start-up lines; ``restart``: a new process's start-up lines."""
    down = await demo_factory(["vllm"], scenario="down", fault_after=0.3, fault_every=0.6,
                              log_dir=str(tmp_path), background=True)
    path = down.sites[0].log.out.path
    await clock.sleep(0.6)  # the crash at 0.3 s
    assert not down.sites[0].listening
    lines = _lines(path)
    assert any("EngineDeadError" in x for x in lines), lines[-5:]
    assert lines[-1].startswith("See https://nanobind"), lines[-1]
    await clock.sleep(0.6)  # back at 0.9 s
    assert down.sites[0].listening
    starts = [x for x in _lines(path) if "Started server process" in x]
    assert len(starts) == 2 and starts[0] != starts[1], starts  # two pids
    restart = await demo_factory(["vllm"], scenario="restart", fault_after=0.3,
                                 fault_every=100, log_dir=str(tmp_path / "r"))
    await clock.sleep(0.6)
    starts = [x for x in _lines(restart.sites[0].log.out.path)
              if "Started server process" in x]
    assert len(starts) == 2 and starts[0] != starts[1], starts


async def test_errors_scenario_logs_vllms_error_line_per_failed_request(demo_factory,
                                                                        tmp_path):
    server = await demo_factory(["vllm", "sglang"], scenario="errors", baseline_s=0,
                                log_dir=str(tmp_path), background=True)
    await clock.sleep(2.5)
    vllm, sglang = (_lines(s.log.out.path) for s in server.sites)
    failed = [i for i, x in enumerate(vllm) if "failed with an internal error" in x]
    assert failed, vllm[-5:]
    for i in failed:  # each is followed by its request's access line
        assert '"POST /v1/completions HTTP/1.1"' in vllm[i + 1], vllm[i + 1]
    assert not any("ERROR" in x for x in sglang)  # SGLang is the control: no error
