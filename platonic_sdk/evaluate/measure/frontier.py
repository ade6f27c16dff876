"""Gain-against-damage frontiers: what an edit buys for what it breaks.

One function computes a frontier point, `point`: over cells, each edited at its own strength,

    gain        mean over cells of the mean over the cell's tasks of (edited - zero-shot) accuracy
                (addition), or of (zero-shot - edited) on the removed task (negation: the removal);
    drop(s)     per damage set s, the mean over the cells that hold s of (zero-shot - edited) on s;
    worst drop  max over the damage sets of drop(s): the one set that pays, which a mean over the sets hides.

The damage sets are the sets a cell lists under its `damage` fields, by default both kinds of kept set
(cells.kept_sets): "controls" (the designated control sets) and "others" (the bank's other transfer tasks), so that
the worst drop is the worst over every set the edit must leave alone; damage=("controls",) judges the control sets
alone, as before issue 33.

A method swept over strengths c_0 < c_1 < ... (studies.strength_sweep) gives one point per strength, all
cells at that strength; `curve` joins them in strength order. Its gain within a budget b is the largest gain
on that polyline whose worst drop is at most b (linear between two sweep points; None when no point of the
curve meets b). A run's own point, each cell at the strength its rule chose, is `point` over the run's cell
records (`outcome` reads one); `distance` places it against a curve. Pure: no model or tensor.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, Mapping, Sequence

import attrs
import numpy as np

BUDGETS = (1.0, 3.0)  # the worst damage set's drops (points) the report and bench_frontier.py summarise at
DAMAGE = ("controls", "others")  # the fields of a cell that list its damage sets (the control sets, the other transfer tasks)


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


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else float("nan")


@attrs.frozen
class Point:
    """Mean gain (removal on negations) over `cells` cells of `kind`, per task too, and each damage set's
    mean drop (`drops`, points; zero-shot minus edited)."""

    kind: str
    cells: int
    gain: float
    per_task: Mapping[str, float] = attrs.field(converter=dict)
    drops: Mapping[str, float] = attrs.field(converter=dict)

    def worst(self, sets: Iterable[str] | None = None) -> tuple[float, str | None]:
        """(drop, name) of the damage set that loses most among `sets` (None: every one); (NaN, None) when none."""
        wanted = None if sets is None else set(sets)
        found = {s: d for s, d in self.drops.items() if wanted is None or s in wanted}
        name = max(found, key=found.get) if found else None
        return (found[name] if name is not None else float("nan")), name

    @property
    def worst_drop(self) -> float:
        return self.worst()[0]

    @property
    def worst_set(self) -> str | None:
        return self.worst()[1]

    @property
    def xy(self) -> tuple[float, float]:
        """(worst drop, gain): where the point lies on a frontier's axes."""
        return self.worst_drop, self.gain


def point(cells: Iterable[Mapping[str, Any]], kind: str, damage: Sequence[str] = DAMAGE) -> Point | None:
    """The frontier point of `cells` of `kind` (None without a cell).

    A cell is a mapping with its `tasks`, the damage sets under each field of `damage` (default: its
    `controls` and `others`), `zero_shot` and `accuracy`: the accuracy (%) of each evaluation set, before and after
    the edit (`outcome` reads one from a run's cell record)."""
    sign = 1.0 if kind == "addition" else -1.0
    gains, per_task, drops = [], defaultdict(list), defaultdict(list)
    for cell in cells:
        zero, acc = cell["zero_shot"], cell["accuracy"]
        moved = {t: sign * (acc[t] - zero[t]) for t in cell["tasks"]}
        gains.append(_mean(list(moved.values())))
        for t, g in moved.items():
            per_task[t].append(g)
        for s in dict.fromkeys(s for field in damage for s in cell.get(field, ())):
            drops[s].append(zero[s] - acc[s])
    if not gains:
        return None
    return Point(kind, len(gains), _mean(gains), {t: _mean(v) for t, v in per_task.items()}, {s: _mean(v) for s, v in drops.items()})


def outcome(record: Mapping[str, Any], method: str) -> dict[str, Any]:
    """A run's cell record (methods.evaluate_cell: `results` by method) as `point` reads it: `method`'s
    accuracies against the cell's zero-shot ones."""
    return {**record, "zero_shot": record["results"]["zero_shot"], "accuracy": record["results"][method]}


def swept_at(records: Iterable[Mapping[str, Any]], strength: float) -> list[dict[str, Any]]:
    """Sweep records (studies.strength_sweep) as `point` reads them at one of their `strengths`: each record
    swept at `strength`, its accuracy per set at it (records not swept at it are left out)."""
    out = []
    for r in records:
        if strength in r["strengths"]:
            i = list(r["strengths"]).index(strength)
            out.append({**r, "accuracy": {s: v[i] for s, v in r["accuracy"].items()}})
    return out


@attrs.frozen
class Curve:
    """One method's frontier on the swept cells of one kind and group: per strength (ascending) the mean
    gain (removal on negations), the worst damage set's mean drop and that set's name."""

    method: str
    kind: str
    group: str | None  # None: cells of every group
    cells: int
    strengths: tuple[float, ...] = attrs.field(converter=tuple)
    gain: tuple[float, ...] = attrs.field(converter=tuple)
    worst_drop: tuple[float, ...] = attrs.field(converter=tuple)
    worst_set: tuple[str | None, ...] = attrs.field(converter=tuple)

    def gain_within(self, budget: float) -> float | None:
        """The best mean gain whose worst damage set's drop is at most `budget` points (gain_within)."""
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


def curve(records: Sequence[Mapping[str, Any]], method: str, kind: str, group: str | None,
          damage: Sequence[str] = DAMAGE) -> Curve | None:
    """`method`'s curve over the sweep records of cells of `kind` and `group` (None: every group; the
    result None when it has no record): at each strength, `point` of the cells swept at it.

    A record is one cell and method (studies.strength_sweep): its `tasks`, damage sets (`damage`: its
    `controls` and `others`), `zero_shot` accuracy per evaluation set, `strengths` and `accuracy` per set (one value
    per strength)."""
    rows = [r for r in records if r["method"] == method and r["kind"] == kind and group in (None, r["group"])]
    if not rows:
        return None
    strengths = sorted({float(c) for r in rows for c in r["strengths"]})
    points = [point(swept_at(rows, c), kind, damage) for c in strengths]
    return Curve(method, kind, group, len(rows), strengths, [p.gain for p in points], [p.worst_drop for p in points],
                 [p.worst_set for p in points])


def curves(records: Sequence[Mapping[str, Any]]) -> list[Curve]:
    """Every (kind, group, method) curve of the sweep, in the records' order."""
    keys = dict.fromkeys((r["kind"], r["group"], r["method"]) for r in records)
    return [c for kind, group, m in keys if (c := curve(records, m, kind, group)) is not None]


def distance(reference: Curve, point: tuple[float, float]) -> dict[str, Any]:
    """How far a (worst drop, gain) point (Point.xy) lies below `reference`'s frontier: the frontier's gain
    at the point's drop (interpolated), and that gain minus the point's (positive: below the frontier; None
    when no sweep point of the reference is within the point's drop)."""
    drop, gain = point
    best = reference.gain_within(drop)
    return {"worst_drop": drop, "gain": gain, "frontier_gain": best, "below_frontier": None if best is None else best - gain}
