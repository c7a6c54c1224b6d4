"""The exporter's log series: ``llmtop_log_events_total{target,severity}`` (a counter since
llmtop started following, every severity present from the start so an alert's ``increase``
sees the first error) and ``llmtop_log_readable{target}``; nothing for an engine whose log
is not followed."""

from __future__ import annotations

from llmtop.config import Config, Target
from llmtop.export.view import View, build
from llmtop.history.store import Store
from llmtop.model.logs import LogLocation
from tests.history.fakes import body, fake_detect, fake_normalize, raw
from tests.log_fakes import burst, event, raw_log

W0 = 1_700_000_000.0


def _store():
    targets = (Target(name="a", base_url="http://127.0.0.1:1", host="127.0.0.1"),
               Target(name="b", base_url="http://127.0.0.1:2", host="127.0.0.1"))
    s = Store(Config(targets=targets, interval_s=1.0), normalize=fake_normalize,
              detect=fake_detect)
    for t in range(0, 5):
        for name in ("a", "b"):
            s.ingest(raw(name, float(t), body()))
        s.commit(float(t), W0 + t)
    return s


def _samples(store):
    out = {}
    for m in build(View(version="t", mode="direct", snap=store.snapshot(10.0))):
        for smp in m.samples:
            if smp.name.startswith("llmtop_log"):
                out[(smp.name, tuple(sorted(smp.labels.items())))] = smp.value
    return out


def test_counter_by_severity_and_readable():
    s = _store()
    s.add_log(raw_log("a", W0 + 4, [event(W0 + 1, "info", "up"), event(W0 + 2, "warning", "w")],
                      t_mono=4.0))
    got = _samples(s)
    key = lambda sev: ("llmtop_log_events_total", (("severity", sev), ("target", "a")))  # noqa: E731
    assert got[key("info")] == 1 and got[key("warning")] == 1
    assert got[key("error")] == 0 and got[key("critical")] == 0  # present before the first
    assert got[("llmtop_log_readable", (("target", "a"),))] == 1.0
    assert not any(("target", "b") in k[1] for k in got)  # b's log is not followed
    s.add_log(raw_log("a", W0 + 5, burst(W0 + 5), t_mono=5.0))
    got = _samples(s)
    assert got[key("error")] == 1 and got[key("info")] == 1 + 12


def test_unreadable_log_reads_zero():
    s = _store()
    loc = LogLocation(kind="file", label="/proc/4711/fd/1", error="is a terminal")
    s.add_log(raw_log("b", W0 + 4, [], location=loc, t_mono=4.0))
    got = _samples(s)
    assert got[("llmtop_log_readable", (("target", "b"),))] == 0.0
