"""Body deltas rebuild the new body byte for byte."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from llmtop.record import delta
from tests.conftest import fixture_text


def _bump(body: str, step: int) -> str:
    """Advance every counter/bucket value like a live server would."""

    def repl(m: re.Match[str]) -> str:
        v = float(m.group(2))
        return f"{m.group(1)} {v + step * (1 + len(m.group(1)) % 3)!r}"

    return re.sub(r"^(vllm:[^ ]*(?:_total|_bucket|_count)[^ ]*) ([0-9.e+]+)$", repl, body,
                  flags=re.M)


def test_real_scrape_roundtrip_is_exact_and_small():
    a = fixture_text("vllm-real-cpu-v0.32.0-under-load.txt")
    b = _bump(a, 1)
    assert a != b
    d = delta.encode(delta.split_body(a), delta.split_body(b))
    assert d is not None
    assert "\n".join(delta.decode(delta.split_body(a), d)) == b
    assert len(d) < len(b) / 10


def test_identical_bodies_give_empty_delta():
    a = fixture_text("vllm-generated-v0.33.0-loggers.txt")
    lines = delta.split_body(a)
    assert delta.encode(lines, list(lines)) == ""
    assert delta.decode(lines, "") == lines


def test_structure_change_needs_a_keyframe():
    a = "x_total 1.0\ny 2\n"
    assert delta.encode(delta.split_body(a), delta.split_body(a + "z 3\n")) is None
    assert delta.encode(delta.split_body(a), delta.split_body("w_total 1.0\ny 2\n")) is None


def test_non_numeric_and_float_changes_are_literal():
    a = delta.split_body('g{a="1"} 0.43\nc 1.7953542017154272e+09\nn NaN\n')
    b = delta.split_body('g{a="1"} 0.5\nc 1.7953542027154272e+09\nn 3.0\n')
    d = delta.encode(a, b)
    assert d is not None and "=" in d
    assert delta.decode(a, d) == b


_token = st.one_of(
    st.integers(-10**6, 10**6).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["NaN", "+Inf", "-Inf", "1e+06", "3641.0"]),
)


@given(st.lists(st.tuples(_token, _token), min_size=1, max_size=30))
def test_roundtrip_property(pairs):
    old = [f"m{i}{{l=\"v\"}} {a}" for i, (a, _) in enumerate(pairs)]
    new = [f"m{i}{{l=\"v\"}} {b}" for i, (_, b) in enumerate(pairs)]
    d = delta.encode(old, new)
    assert d is not None
    assert delta.decode(old, d) == new
