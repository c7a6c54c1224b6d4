"""Exposition parser: agreement with prometheus_client.parser, edge cases, errors, ``want``."""

from __future__ import annotations

import math
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from llmtop.parse.exposition import ParseError, parse
from tests.conftest import FIXTURES, examples, fixture_text


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


@settings(max_examples=examples(300), deadline=None)
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


@settings(max_examples=examples(150), deadline=None)
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
def test_a_series_seen_before_parses_as_the_first_time(value, monkeypatch):
    """The second sight of ``name{labels}`` skips the regex: same result or same error."""
    from llmtop.parse import exposition

    monkeypatch.setattr(exposition, "_SLOTS_MAX", 0)  # no templates: the path below them
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


def test_unchanged_chunks_come_from_the_cache_and_give_the_same_families(monkeypatch):
    """Real vLLM text parsed twice, then with one value changed: the same families as a
    cold parse each time; a counter declared without ``_total`` gets it exactly once."""
    from llmtop.parse import exposition

    monkeypatch.setattr(exposition, "_SLOTS_MAX", 0)  # no templates: the path below them
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


# --- templates: a scrape like an earlier one, values aside -------------------------------


@contextmanager
def _no_templates():
    from llmtop.parse import exposition

    saved = exposition._SLOTS_MAX
    exposition._SLOTS_MAX = 0
    try:
        yield
    finally:
        exposition._SLOTS_MAX = saved


def _outcome(text: str, want=None):
    try:
        return _plain(parse(text, want))
    except ParseError as exc:
        return f"ParseError: {exc}"


def _cold(text: str, want=None):
    """The result without templates (what every parse must give)."""
    with _no_templates():
        return _outcome(text, want)


def _learn(text: str, want=None) -> None:
    for _ in range(2):  # a template is learned the second time a text's key is seen
        _outcome(text, want)


def _hits(monkeypatch) -> list:
    """Collect each template's result (None: it did not fit)."""
    from llmtop.parse import exposition

    got: list = []
    apply = exposition._Template.apply

    def spy(self, lines, want):
        out = apply(self, lines, want)
        got.append(out)
        return out

    monkeypatch.setattr(exposition._Template, "apply", spy)
    return got


def _with_values(text: str, k: int) -> str:
    """``text`` with every sample value changed (``k`` picks the change)."""
    out = []
    for ln in text.split("\n"):
        head, sep, val = ln.rpartition(" ")
        if sep and not ln.startswith("#") and val not in ("NaN", "+Inf", "-Inf"):
            ln = f"{head} {float(val) * 1.5 + k}"
        out.append(ln)
    return "\n".join(out)


def test_a_scrape_with_new_values_is_read_by_its_template(monkeypatch):
    """Real vLLM text learned, then scrapes where every value moved: the template reads them
    (no fallback) and gives what a parse without templates gives, want or not."""
    from llmtop.parse import vllm

    text = fixture_text("vllm-real-cpu-v0.32.0-under-load.txt")
    text += "# TYPE tgi_request_count counter\ntgi_request_count 5\n"
    for want in (None, vllm.want):
        _learn(text, want)
        hits = _hits(monkeypatch)
        for k in range(1, 4):
            moved = _with_values(text, k)
            assert moved != text
            assert _outcome(moved, want) == _cold(moved, want)
            assert hits and hits[-1] is not None  # read by the template
        monkeypatch.undo()
    fams = parse(_with_values(text, 7))
    assert [s.name for s in fams["tgi_request_count"].samples] == ["tgi_request_count_total"]
    assert fams["tgi_request_count"].samples[0].value == 5 * 1.5 + 7


def test_a_skipped_family_that_now_holds_another_familys_line_still_yields_it():
    """An unwanted family's chunk was skipped unread; the next scrape has a line of another
    family there (same line count): that line must start its own family."""
    text = (
        "# HELP a doc\n# TYPE a gauge\na 1\n"
        '# HELP skip doc\n# TYPE skip gauge\nskip{x="1"} 2\nskip{x="2"} 3\n'
        "# TYPE b counter\nb_total 4\n"
    )
    want = {"a", "b", "other"}.__contains__
    _learn(text, want)
    moved = text.replace('skip{x="2"} 3', "other 9")
    got = parse(moved, want)
    assert got["other"].samples[0].value == 9.0
    assert _outcome(moved, want) == _cold(moved, want)
    assert _outcome(text.replace("a 1", "a 8"), want) == _cold(text.replace("a 1", "a 8"), want)


@pytest.mark.parametrize(
    "value", ["7", "1_0", "5\t6", "5 6", "5\r", "\u00a05", "5\u2003", "", "nan", "+Inf", "1e3",
              '"5"', "5{", "0x1", "\u0665", "-0.0", "5 1700000000000"],
)
def test_a_scrape_learned_before_parses_as_without_templates(value):
    """The template's checks of a new value: the same result or the same error."""
    text = '# TYPE s gauge\ns{a="1"} 3\ns 4\nu 6\n# TYPE t gauge\nt{b="2"} 5\n'
    for want in (None, {"s"}.__contains__, {"t"}.__contains__, {"t", "u"}.__contains__):
        _learn(text, want)
        for new in (text.replace("} 3", "} " + value), text.replace("s 4", "s " + value),
                    text.replace("} 5", "} " + value), text.replace("u 6", "u " + value)):
            assert _outcome(new, want) == _cold(new, want), (want, new)


@pytest.mark.parametrize(
    ("text", "new"),
    [
        ("# TYPE g gauge\ng 1\ng 2\n", "# TYPE g gauge\ng 5\ng 6\n"),  # a series twice
        ('# TYPE g gauge\ng{a="1"} 1\nh 3\ng{a="1"} 2\n',
         '# TYPE g gauge\ng{a="1"} 5\nh 3\ng{a="1"} 6\n'),
        ("# TYPE g gauge\ng 5 5\n", "# TYPE g gauge\ng 5 7\n"),  # a timestamp, as the value
        ("# TYPE g gauge\ng 5  5\n", "# TYPE g gauge\ng 5  7\n"),
        ('# TYPE g gauge\ng{a="\\\\"} 5\n', '# TYPE g gauge\ng{a="\\\\"} 7\n'),  # slow path
    ],
)  # fmt: skip
def test_lines_read_another_way_are_not_value_lines(text, new):
    for want in (None, {"g"}.__contains__, {"h"}.__contains__):
        _learn(text, want)
        assert _outcome(new, want) == _cold(new, want)


def test_no_template_when_a_skip_decision_counted_names_that_are_not_plain():
    """A quoted family name may hold spaces or newlines: counting its lines may then read
    into values, so such a text is not learned."""
    from llmtop.parse import exposition

    text = '# TYPE "q 1\\nr" gauge\n{"q 1\\nr"} 1\n# TYPE g gauge\ng 2\n'
    exposition._SLOTS.clear()
    _learn(text, {"g"}.__contains__)
    assert parse(text, {"g"}.__contains__)["g"].samples[0].value == 2.0
    assert not any(s.templates for s in exposition._SLOTS.values())
    _learn(text, None)  # want None skips nothing: learned
    assert any(s.templates for s in exposition._SLOTS.values())


@pytest.mark.parametrize(
    "edit",
    [
        lambda t: t.replace("# HELP a doc", "# HELP a new doc"),
        lambda t: t.replace('a{x="1"}', 'a{x="9"}'),
        lambda t: t.replace('a{x="1"}', 'a_bucket{x="1"}'),
        lambda t: t.replace("skip 2", "a 2"),
        lambda t: t.replace("skip 2", "skip  2"),
        lambda t: t.replace("skip 2", ""),
        lambda t: t.replace("skip 2", "# TYPE other gauge"),
        lambda t: t.replace("skip 2", "skip{x=1} 2"),
        lambda t: t.replace("skip 2", "skip"),
        lambda t: t.replace("gauge\nskip", "counter\nskip"),
        lambda t: t.rstrip("\n"),
        lambda t: t[:-3],
    ],
)
def test_a_changed_structure_is_not_read_by_the_template(edit):
    text = '# HELP a doc\n# TYPE a gauge\na{x="1"} 1\na 2\n# TYPE skip gauge\nskip 2\nz 3\n'
    for want in (None, {"a", "z", "other", "a_bucket"}.__contains__):
        _learn(text, want)
        new = edit(text)
        assert new != text
        assert _outcome(new, want) == _cold(new, want)


def test_another_want_gets_its_own_families():
    """A template learned with one ``want`` does not answer for another that differs."""
    text = fixture_text("sglang-generated-v0.5.23-metrics_collector.txt")
    names = sorted(parse(text))
    first, second = set(names[::2]), set(names[1::2])
    _learn(text, first.__contains__)
    _learn(text, None)
    for want in (first.__contains__, second.__contains__, None, lambda n: n in first):
        moved = _with_values(text, 3)
        assert _outcome(moved, want) == _cold(moved, want)
    assert set(parse(_with_values(text, 4), second.__contains__)) == second


def test_a_fixed_line_that_changes_every_scrape_costs_few_learning_attempts(monkeypatch):
    """A sample with a timestamp is read the slow way: its line is part of the template
    as it was, so a new timestamp misses; learning is then tried less and less often."""
    from llmtop.parse import exposition

    calls = []
    learn = exposition._learn
    monkeypatch.setattr(exposition, "_learn", lambda *a: calls.append(1) or learn(*a))
    exposition._SLOTS.clear()
    for i in range(200):
        text = f'# TYPE g gauge\ng 1 {1700000000000 + i}\nh{{a="1"}} {i}\n'
        assert parse(text)["h"].samples[0].value == i
    assert 1 <= len(calls) <= 200 // exposition._BACKOFF_MAX + 6  # wait 1, 3, 7, ... parses
    calls.clear()
    for i in range(exposition._BACKOFF_MAX + 5):  # no timestamp: learned once more, in time
        assert parse(f'# TYPE g gauge\ng 1\nh{{a="1"}} {i}\n')["h"].samples[0].value == i
    assert len(calls) == 1


def test_template_caches_stay_bounded(monkeypatch):
    from llmtop.parse import exposition

    exposition._SLOTS.clear()
    for i in range(200):  # many keys (line count, first line)
        _learn(f"m{i} {i}\n")
        assert len(exposition._SLOTS) <= exposition._SLOTS_MAX
    for j in range(10):  # many templates under one key
        _learn(f'# TYPE g gauge\ng{{k="{j}"}} 1\n')
    slot = exposition._SLOTS[(3, "# TYPE g gauge")]
    assert len(slot.templates) == exposition._SLOT_TEMPLATES
    assert parse('# TYPE g gauge\ng{k="9"} 2\n')["g"].samples[0].value == 2.0
    monkeypatch.setattr(exposition, "_TEMPLATE_CHARS", 2_000)  # memory: the text they hold
    for i in range(100):
        _learn("".join(f"n{i}_{j} {j}\n" for j in range(20)))
        held = sum(t.chars for s in exposition._SLOTS.values() for t in s.templates)
        assert 0 < held <= 2_000


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(_family(), min_size=1, max_size=5), st.data())
def test_templates_agree_with_the_parser_on_generated_scrapes(fams, data):
    """Learn a generated text, then parse it with new values (valid or not) and maybe one
    line replaced: the same families or the same error as without templates."""
    lines = [line for fam in fams for line in fam]
    if not lines:
        return
    text = "\n".join(lines) + "\n"
    full = _cold(text)
    names = sorted(full) if isinstance(full, dict) else ["x"]
    keep = set(data.draw(st.lists(st.sampled_from(names), max_size=3)))
    want = data.draw(st.sampled_from([None, keep.__contains__]))
    _learn(text, want)
    new = list(lines)
    for i in data.draw(st.lists(st.integers(0, len(new) - 1), max_size=6)):
        head, sep, _ = new[i].rpartition(" ")
        if sep and not new[i].startswith("#"):
            new[i] = f"{head} {data.draw(st.one_of(_value, st.sampled_from(['1_0', '', 'x'])))}"
    if data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(new) - 1))
        new[i] = data.draw(st.sampled_from(
            ["zz 1", 'zz{a="1"} 2', "", "# TYPE zz gauge", new[i] + " 17", new[-1]]
        ))  # fmt: skip
    moved = "\n".join(new) + "\n"
    assert _outcome(moved, want) == _cold(moved, want)


def test_templates_agree_with_the_parser_on_mutated_fixtures():
    """Real fixtures learned, then new values and one-character edits."""
    import random

    from llmtop.parse import sglang, vllm

    rng = random.Random(1)
    texts = [fixture_text(n) for n in PROM_FIXTURES]
    texts = [t for t in texts if t.endswith("\n") and len(t) < 80_000]
    chars = ['"', "{", "}", " ", "\\", ",", "=", "\t", "#", "_", "e", "+", ":", "\r", "\n"]
    for _ in range(150):
        text = rng.choice(texts)
        want = rng.choice([None, vllm.want, sglang.want])
        if not isinstance(_cold(text, want), dict):
            continue
        _learn(text, want)
        lines = text.split("\n")
        for _ in range(rng.randint(1, 20)):
            i = rng.randrange(len(lines))
            head, sep, _val = lines[i].rpartition(" ")
            if sep and not lines[i].startswith("#"):
                lines[i] = f"{head} {rng.choice(['1', '2.5', 'NaN', '1_0', '', 'x', '3 4'])}"
        if rng.random() < 0.5:
            i = rng.randrange(len(lines))
            p = rng.randrange(len(lines[i]) + 1)
            lines[i] = lines[i][:p] + rng.choice(chars) + lines[i][p + 1 :]
        moved = "\n".join(lines)
        assert _outcome(moved, want) == _cold(moved, want)
