"""flags/env/TOML -> Config: merge order, validation, and secrets never shown."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from llmtop.cli import build_parser
from llmtop.config import Config
from llmtop.errors import ConfigError
from llmtop.settings import build_config, default_config_path

SECRET = "sk-test-TOPSECRET-123"


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "config.toml"
    p.write_text(text)
    return p


def test_defaults_without_file(tmp_path):
    cfg = build_config(_args(), environ={"XDG_CONFIG_HOME": str(tmp_path)})
    assert cfg == Config()


def test_default_path_uses_xdg_then_home(tmp_path):
    assert default_config_path({"XDG_CONFIG_HOME": "/x"}) == Path("/x/llmtop/config.toml")
    assert default_config_path({}).parts[-3:] == (".config", "llmtop", "config.toml")


def test_xdg_file_is_read(tmp_path):
    d = tmp_path / "llmtop"
    d.mkdir()
    (d / "config.toml").write_text("interval = 3\n")
    cfg = build_config(_args(), environ={"XDG_CONFIG_HOME": str(tmp_path)})
    assert cfg.interval_s == 3.0


def test_merge_order_defaults_file_env_flags(tmp_path):
    p = _write(
        tmp_path,
        'interval = 5\ntimeout = 4\ntheme = "light"\nttft_slo = 2.5\nitl_slo = 0.2\n'
        "kv_warn = 0.5\nkv_crit = 0.6\napi_key = \"from-file\"\n",
    )
    env = {}
    cfg = build_config(_args("--config", str(p)), environ=env)
    assert (cfg.interval_s, cfg.timeout_s, cfg.theme) == (5.0, 4.0, "light")
    assert cfg.thresholds.ttft_slo_s == 2.5 and cfg.thresholds.itl_slo_s == 0.2
    assert (cfg.thresholds.kv_warn, cfg.thresholds.kv_crit) == (0.5, 0.6)
    assert cfg.api_key == "from-file"
    cfg = build_config(_args("--config", str(p)), environ={"LLMTOP_API_KEY": "from-env"})
    assert cfg.api_key == "from-env"
    cfg = build_config(
        _args("--config", str(p), "--api-key", "from-flag", "--interval", "0.5", "--theme",
              "mono", "--ttft-slo", "9", "--itl-slo", "0.05", "--timeout", "1"),
        environ={"LLMTOP_API_KEY": "from-env"},
    )
    assert cfg.api_key == "from-flag" and cfg.interval_s == 0.5 and cfg.theme == "mono"
    assert cfg.thresholds.ttft_slo_s == 9.0 and cfg.thresholds.itl_slo_s == 0.05
    assert cfg.timeout_s == 1.0


def test_llmtop_config_env_names_file(tmp_path):
    p = _write(tmp_path, "interval = 7\n")
    cfg = build_config(_args(), environ={"LLMTOP_CONFIG": str(p)})
    assert cfg.interval_s == 7.0


def test_targets_from_file_and_flags(tmp_path):
    p = _write(
        tmp_path,
        """
timeout = 3
[[targets]]
name = "prod-vllm"
url = "http://gpu1:8000"
engine = "vllm"
headers = { "X-Team" = "infra" }
api_key_env = "PROD_KEY"

[[targets]]
url = "sglang@gpu2:30000"
insecure = true
metrics_path = "metrics"
""",
    )
    cfg = build_config(
        _args("--config", str(p), "127.0.0.1:8000", "tgi@h:3000"),
        environ={"PROD_KEY": SECRET},
    )
    names = [t.name for t in cfg.targets]
    assert names == ["prod-vllm", "sglang@gpu2:30000", "127.0.0.1:8000", "tgi@h:3000"]
    a, b, c, _ = cfg.targets
    assert a.engine == "vllm" and a.api_key == SECRET and a.headers == (("X-Team", "infra"),)
    assert a.timeout_s == 3.0 and a.verify_tls is True
    assert b.verify_tls is False and b.metrics_path == "/metrics" and b.engine == "sglang"
    assert c.timeout_s == 3.0 and c.api_key is None


def test_engine_key_names_unnamed_target(tmp_path):
    p = _write(tmp_path, '[[targets]]\nurl = "h:8000"\nengine = "triton"\n')
    cfg = build_config(_args("--config", str(p)), environ={})
    assert cfg.targets[0].name == "triton@h:8000" and cfg.targets[0].engine == "triton"


def test_insecure_flag_and_timeout_flag_reach_all_targets(tmp_path):
    p = _write(tmp_path, '[[targets]]\nurl = "https://h:1"\ntimeout = 9\ninsecure = false\n')
    cfg = build_config(
        _args("--config", str(p), "--insecure", "--timeout", "0.7", "https://x:2"), environ={}
    )
    assert cfg.verify_tls is False
    assert all(not t.verify_tls for t in cfg.targets)
    assert all(t.timeout_s == 0.7 for t in cfg.targets)


def test_flags_no_discover_and_gpu_required(tmp_path):
    cfg = build_config(_args("--no-discover", "--gpu-required"),
                       environ={"XDG_CONFIG_HOME": str(tmp_path)})
    assert cfg.discover is False and cfg.gpu_required is True


def test_namespace_missing_attributes_is_fine(tmp_path):
    cfg = build_config(argparse.Namespace(), environ={"XDG_CONFIG_HOME": str(tmp_path)})
    assert cfg == Config()
    cfg = build_config(argparse.Namespace(targets=["h:1"]), environ={"XDG_CONFIG_HOME": "/nope"})
    assert [t.name for t in cfg.targets] == ["h:1"]


def test_duplicates_dropped_and_name_clashes_disambiguated(tmp_path):
    cfg = build_config(
        _args("h:8000", "http://h:8000", "h:8000/prometheus/metrics"),
        environ={"XDG_CONFIG_HOME": str(tmp_path)},
    )
    assert [t.name for t in cfg.targets] == ["h:8000", "h:8000/prometheus/metrics"]


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan")])
def test_interval_must_be_positive(tmp_path, bad):
    # the CLI's argparse type already refuses these; build_config checks values that come
    # from elsewhere (other subcommands' namespaces, the config file)
    args = _args()
    args.interval = bad
    with pytest.raises(ConfigError, match="interval"):
        build_config(args, environ={"XDG_CONFIG_HOME": str(tmp_path)})


@pytest.mark.parametrize("bad", ["0", "-1", "nan"])
def test_cli_refuses_a_bad_interval(bad):
    with pytest.raises(SystemExit) as ei:
        _args("--interval", bad)
    assert ei.value.code == 2


def test_malformed_file_names_file_and_line(tmp_path):
    p = _write(tmp_path, 'interval = 1\ntheme = "dark\n')
    with pytest.raises(ConfigError) as ei:
        build_config(_args("--config", str(p)), environ={})
    msg = str(ei.value)
    assert str(p) in msg and "line 2" in msg and "\n" not in msg


def test_explicit_missing_file_is_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        build_config(_args("--config", str(tmp_path / "nope.toml")), environ={})


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("intervall = 1\n", "unknown key 'intervall'"),
        ('interval = "fast"\n', "'interval' must be a number"),
        ("kv_warn = 1.5\n", "kv_warn"),
        ("kv_warn = 0.9\nkv_crit = 0.8\n", "kv_warn"),
        ('[[targets]]\nname = "x"\n', "'url' is required"),
        ('[[targets]]\nurl = "h:1"\nengine = "nope"\n', "unknown engine"),
        ('[[targets]]\nurl = "vllm@h:1"\nengine = "sglang"\n', "contradicts"),
        ('[[targets]]\nurl = "h:1"\nheaders = { a = 1 }\n', "headers"),
        ('[[targets]]\nurl = "h:1"\napi_key_env = "NOT_SET_ANYWHERE"\n', "NOT_SET_ANYWHERE"),
        ('targets = "h:1"\n', "array of tables"),
        ('[[targets]]\nurl = "h:1"\n[[targets]]\nurl = "h:2"\nname = "h:1"\n', "two targets"),
    ],
)
def test_file_validation(tmp_path, text, needle):
    p = _write(tmp_path, text)
    with pytest.raises(ConfigError) as ei:
        build_config(_args("--config", str(p)), environ={})
    assert needle in str(ei.value)
    assert str(p) in str(ei.value) or "two targets" in str(ei.value)


def test_api_key_never_in_repr_str_or_errors(tmp_path):
    p = _write(
        tmp_path,
        f'api_key = "{SECRET}"\n[[targets]]\nurl = "h:1"\napi_key_env = "K"\n'
        f'headers = {{ "X-Auth" = "{SECRET}-hdr" }}\n',
    )
    cfg = build_config(_args("--config", str(p), "--api-key", SECRET), environ={"K": SECRET})
    assert cfg.api_key == SECRET and cfg.targets[0].api_key == SECRET
    for text in (repr(cfg), str(cfg), repr(cfg.targets), str(cfg.targets[0])):
        assert SECRET not in text
    # an error in a file holding a secret does not echo the secret
    p2 = _write(tmp_path, f'api_key = "{SECRET}"\ninterval = -1\n')
    with pytest.raises(ConfigError) as ei:
        build_config(_args("--config", str(p2)), environ={})
    assert SECRET not in str(ei.value)
    p3 = _write(tmp_path, f'api_key = "{SECRET}\n')
    with pytest.raises(ConfigError) as ei:
        build_config(_args("--config", str(p3)), environ={})
    assert SECRET not in str(ei.value)


def test_api_key_env_top_level(tmp_path):
    p = _write(tmp_path, 'api_key_env = "MY_KEY"\n')
    cfg = build_config(_args("--config", str(p)), environ={"MY_KEY": SECRET})
    assert cfg.api_key == SECRET
