"""``aggregate`` of one rank (its shortcut) equals the general sum of that rank with an
empty one, and shares no dict with its input."""

from __future__ import annotations

from llmtop.model import Hist, ModelSample
from llmtop.parse.common import aggregate


def test_one_rank_aggregates_to_the_same_values_in_new_dicts():
    h = Hist((0.1, float("inf")), (1.0, 3.0), 0.9, 3.0)
    p = ModelSample("m", rank="0", gauges={"running": 2.0, "kv_usage": 0.4},
                    counters={"requests": 5.0}, hists={"ttft": h}, info={"block_size": "16"})
    one = aggregate("m", [p])
    two = aggregate("m", [p, ModelSample("m", rank="1")])
    assert (one.gauges, one.counters, one.hists, one.info) == \
        (two.gauges, two.counters, two.hists, two.info)
    assert one.model == "m" and one.rank is None
    one.gauges["running"] = 9.0
    assert p.gauges["running"] == 2.0  # the rank's own values stay
