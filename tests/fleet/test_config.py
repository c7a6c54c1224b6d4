"""Fleet settings: the ``[prometheus]`` config table, the flags (which win) and ``--at``."""

from __future__ import annotations

import pytest

from llmtop.cli.main import build_parser
from llmtop.errors import ConfigError
from llmtop.settings import build_config


def _config(tmp_path, toml: str, *argv: str):
    path = tmp_path / "config.toml"
    path.write_text(toml)
    args = build_parser().parse_intermixed_args(["--config", str(path), *argv])
    return build_config(args, environ={})


def test_no_url_is_direct_mode(tmp_path):
    assert _config(tmp_path, "").prometheus is None


def test_the_prometheus_table(tmp_path):
    cfg = _config(tmp_path, """
[prometheus]
url = "https://mimir.example/prometheus"
match = 'namespace=~"prod-.*"'
group_by = ["namespace", "pod"]
window = "2m"
scrape_interval = 15
bearer_token_file = "/run/token"
headers = { "X-Scope-OrgID" = "team" }
params = { dedup = "true" }
ca_file = "/etc/ca.pem"
timeout = 5
kind = "mimir"
""").prometheus
    assert cfg.url == "https://mimir.example/prometheus"
    assert cfg.match == 'namespace=~"prod-.*"' and cfg.group_by == ("namespace", "pod")
    assert cfg.window_s == 120.0 and cfg.scrape_interval_s == 15.0 and cfg.timeout_s == 5.0
    assert cfg.headers == (("X-Scope-OrgID", "team"),) and cfg.params == (("dedup", "true"),)
    assert cfg.bearer_token_file == "/run/token" and cfg.ca_file == "/etc/ca.pem"
    assert cfg.kind == "mimir" and cfg.at is None
    assert "team" not in repr(cfg)  # header values (tenants, tokens) stay out of repr


def test_flags_win(tmp_path):
    cfg = _config(tmp_path, '[prometheus]\nurl = "http://a:9090"\nwindow = 300\n',
                  "--prometheus", "http://b:9090", "--window", "90", "--group-by", "job",
                  "--match", 'job="x"', "--prometheus-header", "THANOS-TENANT: t1",
                  "--prometheus-param", "partial_response=false", "--at", "1700000000",
                  "--interval", "30", "--timeout", "3", "--insecure").prometheus
    assert cfg.url == "http://b:9090" and cfg.window_s == 90.0 and cfg.group_by == ("job",)
    assert cfg.match == 'job="x"' and cfg.headers == (("THANOS-TENANT", "t1"),)
    assert cfg.params == (("partial_response", "false"),) and cfg.at == 1700000000.0
    assert cfg.refresh_s == 30.0 and cfg.timeout_s == 3.0 and cfg.insecure


@pytest.mark.parametrize(("toml", "argv", "words"), [
    ('[prometheus]\nurl = "http://a"\nnope = 1\n', (), "unknown key 'nope'"),
    ('[prometheus]\nurl = "http://a"\nkind = "influx"\n', (), "'kind' must be one of"),
    ('[prometheus]\nurl = "http://a"\nwindow = "soon"\n', (), "'window' must be"),
    ("", ("--prometheus", "http://a", "--at", "yesterday"), "--at: cannot read"),
    ("", ("--prometheus", "http://a", "--prometheus-header", "no-colon"), "NAME:VALUE"),
])
def test_bad_settings_are_one_clear_line(tmp_path, toml, argv, words):
    with pytest.raises(ConfigError, match=words):
        _config(tmp_path, toml, *argv)


def test_direct_mode_window_default_is_unchanged():
    args = build_parser().parse_intermixed_args(["--once"])
    assert args.window is None  # main.py turns it into --once's 1 s gap
