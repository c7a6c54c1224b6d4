"""--gpu-peak GBPS,TFLOPS and the config file's gpu_peak: parsed once, the flag wins, bad
values stop with a line."""

from __future__ import annotations

import pytest

from llmtop.cli import build_parser
from llmtop.cli.export import build_parser as build_export_parser
from llmtop.config import GpuPeak
from llmtop.errors import ConfigError
from llmtop.settings import build_config


def _cfg(tmp_path, *argv, file=None, parser=build_parser):
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    if file is not None:
        (tmp_path / "llmtop").mkdir(exist_ok=True)
        (tmp_path / "llmtop" / "config.toml").write_text(file)
    return build_config(parser().parse_args(list(argv)), environ=env)


def test_flag_file_and_neither(tmp_path):
    assert _cfg(tmp_path).gpu_peak is None
    assert _cfg(tmp_path, "--gpu-peak", "3350,989").gpu_peak == GpuPeak(
        3350e9, 989e12, "--gpu-peak")
    assert _cfg(tmp_path, file='gpu_peak = "864,362"\n').gpu_peak == GpuPeak(
        864e9, 362e12, "config gpu_peak")
    assert _cfg(tmp_path, "--gpu-peak", "1,2", file='gpu_peak = "864,362"\n').gpu_peak == \
        GpuPeak(1e9, 2e12, "--gpu-peak")


def test_the_exporter_takes_it_too(tmp_path):
    cfg = _cfg(tmp_path, "--gpu-peak", "600,",
               parser=lambda: build_export_parser(build_parser()))
    assert cfg.gpu_peak == GpuPeak(600e9, None, "--gpu-peak")


@pytest.mark.parametrize(("argv", "file", "line"), [
    (("--gpu-peak", "3350"), None, "--gpu-peak wants GBPS,TFLOPS"),
    (("--gpu-peak", "x,1"), None, "'x' is not a number"),
    ((), 'gpu_peak = "0,1"\n', "config gpu_peak: '0' must be a positive number"),
    ((), "gpu_peak = 3350\n", "'gpu_peak' must be a non-empty string"),
])
def test_bad_values_stop_with_a_line(tmp_path, argv, file, line):
    with pytest.raises(ConfigError, match=line):
        _cfg(tmp_path, *argv, file=file)
