"""Fleet mode's serving stack: routers read from Prometheus by the same names and
the same adapters as in direct mode, and roles from pod labels.

One query joins each refresh (``queries.Plan.stack``, listed in ``docs/fleet.md``), a union
of three parts:

* the routers' own series (``vllm_router_*``, SGLang's ``smg_*`` and older ``sgl_router_*``)
  as they are now, and the same ``W`` seconds earlier (``offset``, ``llmtop_base="1"``). Each
  router instance's two answers are rendered back to exposition text and read by its adapter
  (``parse/``), and ``history.routers.router_row`` takes rates and latencies from the two
  samples, as it does from two scrapes;
* one series per engine instance with the group's labels, ``job``, ``instance``, ``pod`` and
  the pod labels that name a role (``topology.roles``; Prometheus' ``labelmap`` spelling,
  ``llm_d_ai_role``...), tagged ``llmtop_roles``.

``fleet_stack`` then links backends to rows, however they are grouped: a row's addresses are
the ``instance`` values of its members (several for a row grouped by ``job``, ``pod`` or
``model_name``) and ``pod:port``; ``topology.link_stack`` matches a backend URL's
``host:port`` to them (``loose``: a pod-IP DNS name as its IP, a ``vllm-0.svc`` name by its
first label). Pure: a recording's answers replay here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llmtop.fleet.record import role_of
from llmtop.fleet.rows import render, split_groups, target_name
from llmtop.history.routers import router_row
from llmtop.history.rows import Entry
from llmtop.model import EngineRow
from llmtop.model.stack import RouterRow
from llmtop.parse.detect import router_from_body
from llmtop.parse.exposition import ParseError
from llmtop.parse.registry import normalize
from llmtop.topology.link import host_port, link_stack
from llmtop.topology.roles import role_from_labels

__all__ = ["fleet_stack"]

_GROUP = ("job", "instance")


def _routers(now: list[dict], base: list[dict], t: float, window_s: float,
             group: tuple[str, ...]) -> list[RouterRow]:
    """One ``RouterRow`` per router instance with series in ``now``."""
    cur, old = split_groups([now], _GROUP), split_groups([base], _GROUP)
    out = []
    for key, g in sorted(cur.items()):
        target = target_name(g.labels, ("instance",) if "instance" in g.labels else group)
        samples = []
        for tm, grp in ((t - window_s, old.get(key)), (t, g)):
            if grp is None:
                continue
            text = render(grp.series, _GROUP)
            family = router_from_body(text)
            if family is None:
                break
            try:
                sample = normalize(family, text)
            except ParseError:
                continue
            samples.append(Entry(t_mono=tm, t_wall=tm, sample=sample, epoch=0))
        if samples:
            row = RouterRow(target=target, engine=samples[-1].sample.engine, state="ok")
            out.append(router_row(row, samples))
    return out


def _pod_roles(items: list[dict], group: tuple[str, ...]) -> dict[str, str]:
    """Engine target -> role named by its pod labels."""
    out: dict[str, str] = {}
    for it in items:
        labels = it.get("metric") or {}
        role = role_from_labels(labels)
        if role is not None:
            out[target_name(labels, group)] = role
    return out


def _members(items: list[dict], group: tuple[str, ...], rows: Sequence[EngineRow]
             ) -> dict[str, list[str]]:
    """Engine target -> the addresses of its members: each ``instance`` (and ``pod:port``)
    of the roles part, and a row's own ``instance`` label (a row grouped by it that the
    roles part lacks now, kept by the inventory)."""
    out: dict[str, dict[str, None]] = {}
    for it in items:
        labels = it.get("metric") or {}
        inst = labels.get("instance")
        if not isinstance(inst, str) or not inst:
            continue
        addrs = out.setdefault(target_name(labels, group), {})
        addrs[inst] = None
        pod, addr = labels.get("pod"), host_port(inst)
        if isinstance(pod, str) and pod and addr is not None:
            addrs[f"{pod}:{addr[1]}"] = None
    for r in rows:
        inst = (r.labels or {}).get("instance")
        if inst:
            out.setdefault(r.target, {})[inst] = None
    return {t: list(a) for t, a in out.items()}


def fleet_stack(results: dict[str, list[dict[str, Any]]], group: tuple[str, ...], t: float,
                window_s: float, rows: Sequence[EngineRow]) -> list[RouterRow]:
    """The refresh's routers; rows gain their role (pod labels, then the router's) and
    router, backends their engine target."""
    now: list[dict] = []
    base: list[dict] = []
    pods: list[dict] = []
    for it in role_of(results, "stack"):
        metric = it.get("metric") if isinstance(it, dict) else None
        if not isinstance(metric, dict):
            continue
        if metric.get("llmtop_name") == "llmtop_roles":
            pods.append(it)
        elif metric.pop("llmtop_base", None) is not None:
            base.append(it)
        else:
            now.append(it)
    roles = _pod_roles(pods, group)
    for r in rows:
        if r.role is None and r.target in roles:
            r.role = roles[r.target]
    routers = _routers(now, base, t, window_s, group)
    link_stack(rows, routers, _members(pods, group, rows), loose=True)
    return routers
