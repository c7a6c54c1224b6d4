"""What the DCGM part of the fleet warm-up costs llmtop: decoding the ``gpus`` range answer
and reading the GPUs at each point (``pinned.rows_at_times``), and recording it (``fw``).

    .venv/bin/python benchmarks/fleet_warm_gpus.py [--hosts 500] [--gpus 8] [--points 5]

Builds the range answer a Prometheus gives for the warm-up's ``gpus`` query over ``--hosts``
DCGM exporters of ``--gpus`` GPUs each (the demo's DCGM text, ``dcgm_text``: 11 fields per
GPU, as dcgm-exporter's default counters), ``--points`` values per series (the warm-up's
4 or 5), for the fields the warm-up asks (``WARM_GPU_FIELDS``) and, to compare, for every
field (the refresh's ``gpus`` query), then times, best of ``--repeat``: the JSON decode
(orjson, as ``PromClient``), the GPU reading at every point, and the record's JSON + zlib
(what ``--record`` adds). ``--points 1`` with every field is one refresh's GPU part. The
server's own evaluation is not measured here (a plain selector, no ``rate()``: cheap next
to the buckets). Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import zlib

import orjson

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from llmtop.demo.fleet_exporters import dcgm_text
from llmtop.fleet.pinned import rows_at_times
from llmtop.fleet.warm import WARM_GPU_FIELDS
from llmtop.parse.exposition import parse


def _gpu(i: int) -> dict[str, object]:
    return {"index": i, "uuid": f"u{i}", "name": "NVIDIA H100 80GB HBM3",
            "pci_bus_id": f"00000000:{i:02x}:00.0", "util": 0.8, "mem_util": 0.4,
            "mem_used_bytes": 70e9, "mem_free_bytes": 10e9, "power_w": 500.0,
            "energy_j": 1e6, "temp_c": 60.0, "mem_temp_c": 55.0, "sm_clock_mhz": 1980.0,
            "mem_clock_mhz": 2619.0, "throttle": []}


def answer(hosts: int, gpus: int, points: int, fields: tuple[str, ...] | None = None,
           t0: float = 1_795_600_000.0) -> bytes:
    """The ``gpus`` range answer (JSON bytes) as Prometheus sends it (``fields``: only
    these DCGM fields, as the warm-up asks; None: every field, as the refresh asks)."""
    result = []
    times = [t0 + 180.0 * k for k in range(points)]
    for h in range(hosts):
        text = dcgm_text([_gpu(i) for i in range(gpus)], f"node-{h}")
        for fam in parse(text).values():
            for s in fam.samples:
                if fields is not None and s.name not in fields:
                    continue
                metric = {**s.labels, "instance": f"10.1.{h // 250}.{h % 250}:9400",
                          "job": "dcgm", "llmtop_name": s.name}
                result.append({"metric": metric,
                               "values": [[t, repr(s.value)] for t in times]})
    return orjson.dumps({"status": "success",
                         "data": {"resultType": "matrix", "result": result}})


def best(fn: object, repeat: int) -> tuple[float, float, object]:
    """(CPU s, wall s, result) of the fastest of ``repeat`` runs."""
    out: tuple[float, float, object] | None = None
    for _ in range(repeat):
        c, w = time.process_time(), time.perf_counter()
        res = fn()  # type: ignore[operator]
        got = (time.process_time() - c, time.perf_counter() - w, res)
        if out is None or got[0] < out[0]:
            out = got
    assert out is not None
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=500)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--points", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for label, fields in (("the warm-up's fields (WARM_GPU_FIELDS)", WARM_GPU_FIELDS),
                          ("every field of the refresh's gpus query", None)):
        print(f"\n== {label}")
        measure(args, fields)
    return 0


def measure(args: argparse.Namespace, fields: tuple[str, ...] | None) -> None:
    body = answer(args.hosts, args.gpus, args.points, fields)
    c_dec, w_dec, doc = best(lambda: orjson.loads(body), args.repeat)
    result = doc["data"]["result"]  # type: ignore[index]
    c_read, w_read, pts = best(lambda: rows_at_times({"gpus": result}, (), 60.0), args.repeat)
    c_rec, _w, packed = best(lambda: zlib.compress(orjson.dumps({"ans": {"gpus": result}})),
                                args.repeat)
    n_gpus = len(pts[-1][2]) if pts else 0  # type: ignore[index]
    print(f"{args.hosts} hosts x {args.gpus} GPUs = {n_gpus} GPUs read per point, "
          f"{len(result):,} series x {args.points} points; answer {len(body) / 1e6:.1f} MB")
    print(f"  decode (orjson):        {c_dec * 1000:7.0f} ms CPU  {w_dec * 1000:7.0f} ms wall")
    print(f"  GPUs at every point:    {c_read * 1000:7.0f} ms CPU  {w_read * 1000:7.0f} ms wall")
    print(f"  total, per warm-up:     {(c_dec + c_read) * 1000:7.0f} ms CPU "
          "(once per start or travel)")
    print(f"  recording it (--record): {c_rec * 1000:6.0f} ms CPU, "
          f"{len(packed) / 1e6:.2f} MB after zlib")  # type: ignore[arg-type]


if __name__ == "__main__":
    sys.exit(main())
