"""Exposition parser: agreement with prometheus_client.parser, edge cases, errors, ``want``."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from llmtop.parse.exposition import ParseError, parse
from tests.conftest import FIXTURES, fixture_text


def _is_prometheus_text(path: Path) -> bool:
    body = [ln for ln in path.read_text(encoding="utf-8").splitlines() if not ln.startswith("#")]
    first = next((ln.strip() for ln in body if ln.strip()), "")
    return not first.startswith(("{", "[", "<"))


PROM_FIXTURES = sorted(
    p.name
    for p in (FIXTURES / "metrics").glob("*.txt")
    if _is_prometheus_text(p) and not p.name.startswith("edge-truncated")
)


def reference(text: str) -> dict:
    """prometheus_client's view, merged by family name the way ``parse`` merges."""
    out: dict = {}
    for fam in text_string_to_metric_families(text):
        f = out.setdefault(fam.name, [fam.name, fam.type, fam.documentation, []])
        f[3].extend((s.name, dict(s.labels), _v(float(s.value))) for s in fam.samples)
    return out


def ours(text: str) -> dict:
    return {
        k: [f.name, f.type, f.help, [(s.name, s.labels, _v(s.value)) for s in f.samples]]
        for k, f in parse(text).items()
    }


def _v(x: float):
    return "NaN" if math.isnan(x) else x


@pytest.mark.parametrize("name", PROM_FIXTURES)
def test_agrees_with_prometheus_client_on_fixture(name):
    text = fixture_text(name)
    assert ours(text) == reference(text)


def test_fixture_list_is_not_empty():
    assert "vllm-generated-v0.33.0-loggers.txt" in PROM_FIXTURES
    assert "sglang-generated-v0.5.23-metrics_collector.txt" in PROM_FIXTURES
    assert any(n.startswith("dcgm-") for n in PROM_FIXTURES)


# --- generated inputs ---------------------------------------------------------------------

_name = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,12}", fullmatch=True)
_lname = st.from_regex(r"[a-zA-Z][a-zA-Z0-9_]{0,8}", fullmatch=True)
_lvalue = st.lists(
    st.sampled_from(["a", "Z", "0", " ", ",", "=", "{", "}", "/", "\\\\", '\\"', "\\n", "é", "#"]),
    max_size=8,
).map("".join)
_value = st.one_of(
    st.sampled_from(["NaN", "+Inf", "-Inf", "0", "1", "1.0", "1e3", "8.128902e+06", "-2.5E-3"]),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers(-(10**12), 10**12).map(str),
)
_type = st.sampled_from(["counter", "gauge", "histogram", "summary", "untyped", None])


@st.composite
def _family(draw):
    name = draw(_name)
    typ = draw(_type)
    lines = []
    help_first = draw(st.booleans())
    help_line = f"# HELP {name} " + draw(st.sampled_from(["doc", "a \\\\ b", "x\\ny", ""]))
    if typ is not None:
        type_line = f"# TYPE {name} {typ}"
        lines += [help_line, type_line] if help_first else [type_line, help_line]
    elif draw(st.booleans()):
        lines.append(help_line)
    suffixes = {"histogram": ["_bucket", "_sum", "_count"], "summary": ["", "_sum", "_count"]}
    for _ in range(draw(st.integers(0, 4))):
        sfx = draw(st.sampled_from(suffixes.get(typ or "", [""])))
        labels = draw(st.dictionaries(_lname, _lvalue, max_size=3))
        if sfx == "_bucket":
            labels["le"] = draw(st.sampled_from(["0.1", "1", "+Inf"]))
        sep = draw(st.sampled_from([",", ", "]))
        lab = sep.join(f'{k}="{v}"' for k, v in labels.items())
        lab = "{" + lab + "}" if labels or draw(st.booleans()) else ""
        ts = draw(st.sampled_from(["", " 1700000000000"]))
        lines.append(f"{name}{sfx}{lab} {draw(_value)}{ts}")
    return lines


@settings(max_examples=300, deadline=None)
@given(st.lists(_family(), min_size=1, max_size=5), st.sampled_from(["\n", "\r\n"]))
def test_agrees_with_prometheus_client_on_generated(fams, nl):
    text = nl.join(line for fam in fams for line in fam) + nl
    try:
        expected = reference(text)
    except Exception:
        with pytest.raises(ParseError):
            parse(text)
        return
    if not text.strip():
        with pytest.raises(ParseError):
            parse(text)
        return
    assert ours(text) == expected


# --- specific shapes ---------------------------------------------------------------------


def test_counter_without_total_gets_total_samples():
    fams = parse("# TYPE tgi_request_success counter\ntgi_request_success 5\n")
    fam = fams["tgi_request_success"]
    assert fam.type == "counter"
    assert [s.name for s in fam.samples] == ["tgi_request_success_total"]


def test_counter_with_total_drops_it_from_family():
    fams = parse('# HELP x_total doc\n# TYPE x_total counter\nx_total{a="b"} 2\n')
    assert list(fams) == ["x"]
    assert fams["x"].samples[0].name == "x_total"


def test_help_after_type_and_escapes():
    text = (
        "# TYPE m gauge\n"
        "# HELP m line one\\nline two \\\\ end\n"
        'm{path="C:\\\\dir",quote="say \\"hi\\"",nl="a\\nb",other="\\t"} 1\n'
    )
    fam = parse(text)["m"]
    assert fam.help == "line one\nline two \\ end"
    assert fam.samples[0].labels == {
        "path": "C:\\dir",
        "quote": 'say "hi"',
        "nl": "a\nb",
        "other": "\\t",
    }


def test_values_nan_inf_exponent_timestamp():
    text = (
        '# TYPE g gauge\ng{a="1"} NaN\ng{a="2"} +Inf\ng{a="3"} -Inf\n'
        'g{a="4"} 1.5e+06 1700000000000\ng{a="5"} 7\n'
    )
    vals = [s.value for s in parse(text)["g"].samples]
    assert math.isnan(vals[0])
    assert vals[1:] == [math.inf, -math.inf, 1.5e6, 7.0]


def test_dcgm_spaces_after_commas():
    text = 'DCGM_FI_DEV_GPU_TEMP{gpu="0", UUID="GPU-1", modelName="A100"} 33\n'
    s = parse(text)["DCGM_FI_DEV_GPU_TEMP"].samples[0]
    assert s.labels == {"gpu": "0", "UUID": "GPU-1", "modelName": "A100"}
    assert s.value == 33.0


def test_gauge_with_le_label_is_not_a_histogram():
    text = (
        "# TYPE sglang:routing_key_running_req_count gauge\n"
        'sglang:routing_key_running_req_count{le="1",pid="7"} 3\n'
        'sglang:routing_key_running_req_count{gt="1",pid="7"} 1\n'
    )
    fam = parse(text)["sglang:routing_key_running_req_count"]
    assert fam.type == "gauge"
    assert [s.labels for s in fam.samples] == [{"le": "1", "pid": "7"}, {"gt": "1", "pid": "7"}]


def test_untyped_samples_without_type():
    fams = parse('foo 1\nbar{x="y"} 2\nfoo 3\n')
    assert fams["foo"].type == "unknown"
    assert [s.value for s in fams["foo"].samples] == [1.0, 3.0]
    assert fams["bar"].samples[0].labels == {"x": "y"}


def test_histogram_created_sample_becomes_own_family():
    text = '# TYPE h histogram\nh_bucket{le="+Inf"} 2\nh_sum 3\nh_count 2\nh_created 1.7e9\n'
    fams = parse(text)
    assert [s.name for s in fams["h"].samples] == ["h_bucket", "h_sum", "h_count"]
    assert fams["h_created"].samples[0].value == 1.7e9


def test_last_line_without_newline_is_fine_when_complete():
    assert parse("# TYPE g gauge\ng 1")["g"].samples[0].value == 1.0


# --- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize("body", ["", "   \n\t\n"])
def test_empty_body(body):
    with pytest.raises(ParseError, match="empty body"):
        parse(body)


def test_html_body():
    with pytest.raises(ParseError, match="HTML page, not metrics"):
        parse(fixture_text("edge-html-status-200.txt").split("\n", 1)[1])


def test_truncated_body():
    with pytest.raises(ParseError, match="truncated body"):
        parse(fixture_text("edge-truncated-body.txt"))


def test_truncated_fixture_starts_with_note_and_is_cut():
    text = fixture_text("edge-truncated-body.txt")
    assert text.startswith("# hand-made")
    assert not text.endswith("\n")


def test_json_body():
    with pytest.raises(ParseError, match="JSON"):
        parse('[{"iter": 1, "iterLatencyMS": 2}]')


def test_garbage_names_the_line():
    with pytest.raises(ParseError, match=r"^line 3: "):
        parse("# TYPE g gauge\ng 1\nthis is not a metric line\ng 2\n")


def test_bad_type_is_an_error():
    with pytest.raises(ParseError, match="line 1"):
        parse("# TYPE g sometype\ng 1\n")


def test_label_escaping_fixture():
    fams = parse(fixture_text("edge-label-escaping.txt"))
    assert ours(fixture_text("edge-label-escaping.txt")) == reference(
        fixture_text("edge-label-escaping.txt")
    )
    labels = fams["vllm:num_requests_running"].samples[0].labels
    assert labels["model_name"] == 'my "quoted" model\\name\nline2'


# --- want --------------------------------------------------------------------------------


def test_want_keeps_only_wanted_families_with_identical_content():
    text = fixture_text("vllm-generated-v0.33.0-loggers.txt")
    full = parse(text)
    keep = {"vllm:num_requests_running", "vllm:prompt_tokens", "vllm:e2e_request_latency_seconds"}
    part = parse(text, want=keep.__contains__)
    assert set(part) == keep
    for k in keep:
        assert part[k] == full[k]


def test_want_still_catches_a_truncated_last_line():
    with pytest.raises(ParseError, match="truncated body"):
        parse('# TYPE g gauge\ng{a="b"} 1\ng{a="', want=lambda n: False)


def test_want_skips_a_chunk_only_when_every_line_is_the_familys_own():
    """Lines of an unwanted family are skipped unread, but a line of another family (or a
    blank line) in between is still read, plain and quoted family names alike."""
    text = (
        '# HELP "a b" doc\n# TYPE "a b" gauge\n{"a b"} 1\nother 2\n'
        "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 2\nh_count 1\nh_total 3\n"
        "# TYPE g gauge\ng 3\ng{x=\"1\"} 4\n\nlast 5\n"
    )
    full = parse(text)
    assert set(full) == {"a b", "other", "h", "h_total", "g", "last"}
    for keep in ({"other", "last", "h_total"}, {"g", "h"}, set()):
        part = parse(text, want=keep.__contains__)
        assert _plain(part) == _plain({k: v for k, v in full.items() if k in keep})


def test_fixture_dir_exists():
    assert Path(FIXTURES / "metrics").is_dir()


@settings(max_examples=150, deadline=None)
@given(st.lists(_family(), min_size=1, max_size=5), st.data())
def test_want_keeps_exactly_the_wanted_families(fams, data):
    text = "\n".join(line for fam in fams for line in fam) + "\n"
    try:
        full = parse(text)
    except ParseError:
        return
    keep = set(data.draw(st.lists(st.sampled_from(sorted(full) or ["x"]), max_size=3)))
    part = parse(text, want=keep.__contains__)
    assert _plain(part) == _plain({k: v for k, v in full.items() if k in keep})


def _plain(fams: dict) -> dict:
    return {
        k: [f.name, f.type, f.help, [(s.name, s.labels, _v(s.value)) for s in f.samples]]
        for k, f in fams.items()
    }


def test_agrees_on_mutated_fixtures():
    """Random one-character edits of small real fixtures: both parsers reject, or agree."""
    import random

    rng = random.Random(0)
    small = [fixture_text(n) for n in PROM_FIXTURES if len(fixture_text(n)) < 12_000]
    chars = ['"', "{", "}", " ", "\\", ",", "=", "\t", "#", "_", "e", "+", ":", "\r", 'le="1"']
    for _ in range(400):
        lines = rng.choice(small).split("\n")
        i = rng.randrange(len(lines))
        ln = lines[i]
        p = rng.randrange(len(ln) + 1)
        op = rng.random()
        if op < 0.6:
            ln = ln[:p] + rng.choice(chars) + ln[p:]
        elif op < 0.9:
            ln = ln[:p] + ln[p + 1 :]
        else:
            ln = ln[:p]
        lines[i] = ln
        text = "\n".join(lines)
        try:
            expected = reference(text)
        except Exception:
            with pytest.raises(ParseError):
                parse(text)
            continue
        assert ours(text) == expected, lines[i]


def test_le_inside_a_label_value_is_not_the_le_label():
    text = (
        "# TYPE h histogram\n"
        'h_bucket{a="x,le=",le="0.1"} 1\n'
        'h_bucket{a="x,le=",le="+Inf"} 2\n'
        'h_bucket{a="y",le="0.1"} 3\n'
        'h_bucket{le="0.1",a="y"} 4\n'
    )
    assert ours(text) == reference(text)
    labels = [s.labels for s in parse(text)["h"].samples]
    assert labels[1] == {"a": "x,le=", "le": "+Inf"}


def test_leading_bom_is_ignored():
    assert parse("\ufeff# TYPE g gauge\ng 1\n")["g"].samples[0].value == 1.0


@pytest.mark.parametrize(
    "value", ["7", "1_0", "5\t6", "5 6", "5\r", "\u00a05", "5\u2003", "", "nan", "+Inf", "1e3",
              '"5"', "5{", "0x1", "\u0665"],
)
def test_a_series_seen_before_parses_as_the_first_time(value):
    """The second sight of ``name{labels}`` skips the regex: same result or same error."""
    from llmtop.parse import exposition

    seen = '# TYPE s gauge\ns{a="1"} 3\ns 4\n'
    text = f'# TYPE s gauge\ns{{a="1"}} {value}\ns {value}\n'
    exposition._SERIES.clear()
    exposition._HEADS.clear()
    exposition._CHUNKS.clear()  # else a cached chunk would skip the series path under test
    try:
        cold = ours(text)
    except ParseError as exc:
        cold = str(exc)
    parse(seen)  # both series are now known
    assert 's{a="1"}' in exposition._SERIES and "# TYPE s gauge" in exposition._HEADS
    try:
        warm = ours(text)
    except ParseError as exc:
        warm = str(exc)
    assert warm == cold


@pytest.mark.parametrize("bad", [
    "# TYPE s gauge\n# TYPE s nonsense\ns 1\n", "# HELP s\r doc\ns 1\n", "# TYPE s\ns 1\n",
    "# HELP s a\\\\b\\nc\n# TYPE s gauge\ns 1\n",
])
def test_a_comment_line_seen_before_reads_as_the_first_time(bad):
    from llmtop.parse import exposition

    def run():
        try:
            return ours(bad)
        except ParseError as exc:
            return str(exc)

    exposition._HEADS.clear()
    cold = run()
    assert run() == cold  # the second time from the cache


def test_unchanged_chunks_come_from_the_cache_and_give_the_same_families():
    """Real vLLM text parsed twice, then with one value changed: the same families as a
    cold parse each time; a counter declared without ``_total`` gets it exactly once."""
    from llmtop.parse import exposition

    text = fixture_text("vllm-real-cpu-v0.32.0-under-load.txt")
    text += "# TYPE tgi_request_count counter\ntgi_request_count 5\n"
    exposition._CHUNKS.clear()
    cold = parse(text)
    assert exposition._CHUNKS.new  # chunks were kept
    warm = parse(text)
    assert warm == cold
    assert [s.name for s in warm["tgi_request_count"].samples] == ["tgi_request_count_total"]
    changed = text.replace("tgi_request_count 5", "tgi_request_count 6")
    assert parse(changed)["tgi_request_count"].samples[0].value == 6.0
    exposition._CHUNKS.clear()
    assert parse(changed) == parse(changed)


def test_chunk_cache_memory_is_bounded_by_its_text():
    from llmtop.parse.exposition import Sample, _ChunkCache

    cache = _ChunkCache(100)
    for i in range(1000):
        cache.put(("f", "gauge", f"f {i}\n" * 10), (Sample("f", {}, float(i)),))
    held = sum(len(k[2]) for k in (*cache.new, *cache.old))
    assert held <= 2 * 100 + 60
    assert cache.get(("f", "gauge", "f 999\n" * 10)) is not None
    assert cache.get(("f", "gauge", "f 0\n" * 10)) is None
