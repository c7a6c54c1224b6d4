"""``Store.forget``: a target no longer watched leaves no row and no sparklines behind."""

from __future__ import annotations

from llmtop.config import Config, Target
from llmtop.history.store import Store
from tests.history.fakes import body, fake_detect, fake_normalize, raw


def test_a_forgotten_target_has_no_row_and_no_series():
    ts = tuple(Target(name=n, base_url=f"http://127.0.0.1:{i + 1}", host="127.0.0.1")
               for i, n in enumerate(("a", "b")))
    s = Store(Config(targets=ts, interval_s=1.0), normalize=fake_normalize, detect=fake_detect)
    for i in range(3):
        for n in ("a", "b"):
            s.ingest(raw(n, float(i), body(counters={"requests": float(i)},
                                            gauges={"running": 1.0})))
        s.commit(float(i), 1.7e9 + i)
    keys = {r.target: r.key for r in s.snapshot(10.0).engines}
    assert s.series(keys["b"], "running")
    s.forget("b")
    assert s.targets() == ["a"] and s.history_of("b") is None
    assert [r.target for r in s.snapshot(10.0).engines] == ["a"]
    assert s.series(keys["b"], "running") == [] and s.series(keys["a"], "running")
    s.commit(3.0, 1.7e9 + 3)  # commits go on without it
    assert [r.target for r in s.snapshot(10.0).engines] == ["a"]
