"""End to end: ``python -m llmtop --once`` with API keys, config files and no targets.

Secrets never show up in any output; a refused key says so; a bad config file, a missing
one or no target at all is one clear line with the documented exit status.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.e2e.conftest import needs_parsers, run_llmtop

TIMEOUT = "2"
SECRET = "sk-e2e-0123456789-very-secret"


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def test_no_bearer_unless_configured(servers):
    ports = servers.start(["http_401"])
    run = run_llmtop("--once", "--json", "--window", "0", "--timeout", TIMEOUT,
                     f"127.0.0.1:{ports['http_401']}")
    assert run.rc == 1
    row = run.json()["engines"][0]
    assert row["state"] == "unauthorized"
    assert row["error"] == "unauthorized (HTTP 401) — set an API key"
    sent = servers.requests[ports["http_401"]]
    assert sent and all("authorization" not in h for _, h in sent)


@pytest.mark.parametrize("how", ["flag", "env"])
def test_refused_key_is_said_and_never_shown(servers, how):
    ports = servers.start(["http_401", "http_500"])
    targets = [f"127.0.0.1:{p}" for p in ports.values()]
    args = ["--once", "--json", "--window", "0", "--timeout", TIMEOUT, *targets]
    if how == "flag":
        run = run_llmtop("--api-key", SECRET, *args)
    else:
        run = run_llmtop(*args, env={"LLMTOP_API_KEY": SECRET})
    assert SECRET not in run.stdout and SECRET not in run.stderr
    rows = run.rows()
    row = rows[f"127.0.0.1:{ports['http_401']}"]
    assert row["state"] == "unauthorized"
    assert row["error"] == "unauthorized (HTTP 401) — the API key was refused"
    # the bearer was sent to every target (it is global), exactly as configured
    for port in ports.values():
        sent = [h for p, h in servers.requests[port] if p == "/metrics"]
        assert sent and all(h.get("authorization") == f"Bearer {SECRET}" for h in sent)
    assert run.rc == 1
    assert SECRET not in _one_line(run.stderr)


@needs_parsers
def test_key_in_the_table_and_json_output_never(servers):
    ports = servers.start(["healthy"])
    run = run_llmtop("--once", "--api-key", SECRET, "--window", "0.2", "--timeout", TIMEOUT,
                     f"127.0.0.1:{ports['healthy']}")
    assert run.rc == 0, run.stderr
    assert SECRET not in run.stdout and SECRET not in run.stderr
    assert "tiny-llama" in run.stdout


def test_no_target_and_no_discovery_is_one_line_exit_one():
    run = run_llmtop("--once", "--json", "--no-discover")
    assert run.rc == 1
    line = _one_line(run.stderr)
    assert line.startswith("llmtop: ") and "TARGET" in line
    # stdout stays one valid JSON object for scripts: nothing found, and why
    doc = json.loads(run.stdout)
    assert doc["engines"] == [] and doc["message"]


@pytest.mark.parametrize(("text", "words"), [
    ("interval = \n", ["config.toml", "line 1"]),
    ("interval = -1\n", ["config.toml", "interval"]),
    ("intervall = 1.0\n", ["config.toml", "intervall"]),
    ('[[targets]]\nurl = "127.0.0.1:notaport"\n', ["config.toml"]),
    ('api_key_env = "LLMTOP_E2E_UNSET_VAR"\n', ["LLMTOP_E2E_UNSET_VAR"]),
    ("timeout = \"fast\"\n", ["config.toml", "timeout"]),
    (b"\xff\xfe not utf-8 \x00".decode("latin-1"), ["config.toml"]),
])
def test_bad_config_file_is_one_line_exit_two(tmp_path, text, words):
    cfg = tmp_path / "config.toml"
    cfg.write_text(text, encoding="latin-1")
    run = run_llmtop("--once", "--json", "--config", str(cfg), "--window", "0", "127.0.0.1:1")
    assert run.rc == 2, (run.rc, run.stderr)
    line = _one_line(run.stderr)
    assert line.startswith("llmtop: ")
    for w in words:
        assert w in line, line
    assert run.stdout == ""


def test_missing_config_file_named_explicitly(tmp_path):
    missing = tmp_path / "nope.toml"
    run = run_llmtop("--once", "--json", "--config", str(missing), "127.0.0.1:1")
    assert run.rc == 2
    line = _one_line(run.stderr)
    assert "nope.toml" in line


def test_config_targets_with_headers_and_own_key(servers, tmp_path):
    """A [[targets]] table: its headers and its own key (from an env var) are sent, the
    key never printed; the CLI target beside it gets no key."""
    ports = servers.start(["http_401", "http_500"])
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        "[[targets]]\n"
        'name = "guarded"\n'
        f'url = "127.0.0.1:{ports["http_401"]}"\n'
        'headers = { "X-Team" = "infra" }\n'
        'api_key_env = "LLMTOP_E2E_KEY"\n'
        f"timeout = {TIMEOUT}\n",
        encoding="utf-8",
    )
    run = run_llmtop("--once", "--json", "--config", str(cfg), "--window", "0",
                     "--timeout", TIMEOUT, f"127.0.0.1:{ports['http_500']}",
                     env={"LLMTOP_E2E_KEY": SECRET})
    assert SECRET not in run.stdout + run.stderr
    rows = run.rows()
    assert list(rows) == ["guarded", f"127.0.0.1:{ports['http_500']}"]
    assert rows["guarded"]["state"] == "unauthorized"
    assert "refused" in rows["guarded"]["error"]
    guarded = [h for p, h in servers.requests[ports["http_401"]] if p == "/metrics"]
    assert guarded and guarded[0].get("authorization") == f"Bearer {SECRET}"
    assert guarded[0].get("x-team") == "infra"
    other = [h for p, h in servers.requests[ports["http_500"]] if p == "/metrics"]
    assert other and "authorization" not in other[0]


@pytest.mark.parametrize("flag", [
    ["--timeout", "0"], ["--timeout", "-1"], ["--timeout", "nan"], ["--timeout", "inf"],
    ["--interval", "0"], ["--interval", "nan"], ["--ttft-slo", "-1"], ["--itl-slo", "nan"],
])
def test_bad_number_flag_is_one_line_exit_two(flag):
    run = run_llmtop("--once", "--json", *flag, "--window", "0", "127.0.0.1:1")
    assert run.rc == 2, (run.rc, run.stderr)
    line = _one_line(run.stderr)
    assert line.startswith("llmtop: ") and flag[0] in line
    assert run.stdout == ""


@pytest.mark.parametrize("value", ["nan", "inf", "-5"])
def test_window_must_be_a_finite_number(value):
    try:
        run = run_llmtop("--once", "--json", "--window", value, "--no-discover", "127.0.0.1:1",
                         timeout=4)
    except subprocess.TimeoutExpired:
        pytest.fail(f"--window {value}: still running after 4 s")
    assert run.rc == 2, (run.rc, run.stderr)
    line = _one_line(run.stderr)
    assert "--window" in line
