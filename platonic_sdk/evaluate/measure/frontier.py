"""Gain-against-damage frontiers of a strength sweep: what a method buys for what it breaks.

A method swept over strengths c_0 < c_1 < ... gives, per cell kind and group, one point per strength:

    gain(c)        mean over cells of the mean over the cell's tasks of (edited - zero-shot) accuracy
                   (addition), or of (zero-shot - edited) on the removed task (negation: the removal);
    worst drop(c)  max over control sets of the mean over cells of (zero-shot - edited) on that set:
                   the one set that pays, which a mean over the sets hides.

The curve joins the points in strength order; its gain within a budget b is the largest gain on that
polyline whose worst drop is at most b (linear between two sweep points; None when no point of the
curve meets b). Pure: it reads the sweep's records (studies.strength_sweep), no model or tensor.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Mapping, Sequence

import attrs
import numpy as np

BUDGETS = (1.0, 3.0)  # the worst control drops (points) the report and bench_frontier.py summarise at


def gain_within(drops: Sequence[float], gains: Sequence[float], budget: float) -> float | None:
    """The largest gain on the polyline through (drops[i], gains[i]) (in sweep order) whose drop is <= budget.

    A segment whose ends straddle the budget contributes its point at drop = budget, linearly
    interpolated; points with a NaN are left out (their segments with them). None when nothing meets it.
    """
    if len(drops) != len(gains):
        raise ValueError(f"drops and gains differ in length ({len(drops)} and {len(gains)})")
    points = [(float(d), float(g)) for d, g in zip(drops, gains)]
    found = [g for d, g in points if d <= budget and np.isfinite(g)]
    for (d0, g0), (d1, g1) in zip(points, points[1:]):
        if np.isfinite([d0, g0, d1, g1]).all() and min(d0, d1) < budget < max(d0, d1):
            found.append(g0 + (budget - d0) / (d1 - d0) * (g1 - g0))
    return max(found) if found else None


def at_strength(strengths: Sequence[float], values: Sequence[float], strength: float) -> float | None:
    """`values` linearly interpolated at `strength` on the sweep (None outside its range)."""
    if not len(strengths) or not min(strengths) <= strength <= max(strengths):
        return None
    return float(np.interp(strength, strengths, values))


@attrs.frozen
class Curve:
    """One method's frontier on the swept cells of one kind and group: per strength (ascending) the mean
    gain (removal on negations), the worst control set's mean drop and that set's name."""

    method: str
    kind: str
    group: str | None  # None: cells of every group
    cells: int
    strengths: tuple[float, ...] = attrs.field(converter=tuple)
    gain: tuple[float, ...] = attrs.field(converter=tuple)
    worst_drop: tuple[float, ...] = attrs.field(converter=tuple)
    worst_set: tuple[str | None, ...] = attrs.field(converter=tuple)

    def gain_within(self, budget: float) -> float | None:
        """The best mean gain whose worst control drop is at most `budget` points (gain_within)."""
        return gain_within(self.worst_drop, self.gain, budget)

    def point(self, strength: float) -> tuple[float, float] | None:
        """(worst drop, gain) at `strength`, linear between sweep points (None outside the sweep)."""
        drop, gain = at_strength(self.strengths, self.worst_drop, strength), at_strength(self.strengths, self.gain, strength)
        return None if drop is None or gain is None else (drop, gain)

    def summary(self, budgets: Sequence[float] = BUDGETS) -> dict[str, Any]:
        """JSON-ready: the points and the gain within each budget (keys "1", "3", ...)."""
        return {"method": self.method, "kind": self.kind, "group": self.group, "cells": self.cells,
                "strengths": list(self.strengths), "gain": list(self.gain), "worst_drop": list(self.worst_drop),
                "worst_set": list(self.worst_set), "within": {f"{b:g}": self.gain_within(b) for b in budgets}}


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else float("nan")


def curve(records: Sequence[Mapping[str, Any]], method: str, kind: str, group: str | None) -> Curve | None:
    """`method`'s curve over the sweep records of cells of `kind` and `group` (None: every group; the
    result None when it has no record).

    A record is one cell and method (studies.strength_sweep): its `tasks`, `controls`, `zero_shot`
    accuracy per evaluation set, `strengths` and `accuracy` per set (one value per strength)."""
    rows = [r for r in records if r["method"] == method and r["kind"] == kind and group in (None, r["group"])]
    if not rows:
        return None
    strengths = sorted({float(c) for r in rows for c in r["strengths"]})
    sign = 1.0 if kind == "addition" else -1.0
    gain, worst, worst_set = [], [], []
    for c in strengths:
        gains, drops = [], defaultdict(list)
        for r in rows:
            if c not in r["strengths"]:
                continue
            i = list(r["strengths"]).index(c)
            zero, acc = r["zero_shot"], r["accuracy"]
            gains.append(_mean([sign * (acc[t][i] - zero[t]) for t in r["tasks"]]))
            for s in r["controls"]:
                drops[s].append(zero[s] - acc[s][i])
        gain.append(_mean(gains))
        by_set = {s: _mean(v) for s, v in drops.items()}
        name = max(by_set, key=by_set.get) if by_set else None
        worst.append(by_set[name] if name is not None else float("nan"))
        worst_set.append(name)
    return Curve(method, kind, group, len(rows), strengths, gain, worst, worst_set)


def curves(records: Sequence[Mapping[str, Any]]) -> list[Curve]:
    """Every (kind, group, method) curve of the sweep, in the records' order."""
    keys = dict.fromkeys((r["kind"], r["group"], r["method"]) for r in records)
    return [c for kind, group, m in keys if (c := curve(records, m, kind, group)) is not None]


def distance(reference: Curve, point: tuple[float, float]) -> dict[str, Any]:
    """How far a (worst drop, gain) point lies below `reference`'s frontier: the frontier's gain at the
    point's drop (interpolated), and that gain minus the point's (positive: below the frontier; None
    when no sweep point of the reference is within the point's drop)."""
    drop, gain = point
    best = reference.gain_within(drop)
    return {"worst_drop": drop, "gain": gain, "frontier_gain": best, "below_frontier": None if best is None else best - gain}
