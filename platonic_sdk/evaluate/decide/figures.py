"""The figures a protocol judges, from measured replicates (measure.py): pure, no model or tensor.

Per world, cells pooled over the replicates' seeds (equal counts per seed, so a pooled mean is the mean over
seeds), every figure through the frontier module (frontier.point, frontier.curve):

    frontiers   per kind and swept method (Protocol.swept), the sweep's (worst drop, gain) polyline in strength order;
    candidates  per candidate and kind, its point: gain (removal on negations), worst damage set's drop and name (over
                the protocol's `damage`), the worst set of each kind of kept set (`damage`: controls and others, each
                [drop, name], shown whatever the protocol judges), gain per task, the labelled reference's gain per task
                at the same point, and the same per seed.

The result is plain JSON, the shape judge.py reads (its tests build such tables by hand):

    {world: {"frontiers": {kind: {method: {"drops": [...], "gains": [...]}}},
             "candidates": {name: {kind: {"gain", "worst_drop", "worst_set", "damage", "cells", "per_task",
                                          "reference_per_task", "seeds": {seed: {...the same, without "seeds"}}}}}}}
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ...errors import PlatonicError
from ..measure.frontier import DAMAGE, curve, point
from ..plan.settings import KINDS
from .protocol import Protocol

POINT_METHODS = ("closed_form", "reference")  # a candidate's point records: the closed form, the labelled reference


def figures(protocol: Protocol, runs: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """The figures of `runs` ({world: [replicate runs]}, measure.measure_replicate's shape) under `protocol`."""
    out = {}
    for world in protocol.worlds:
        if not runs.get(world):
            raise PlatonicError(f"no measured replicate of world {world!r}")
        sweep = [r for run in runs[world] for r in run["sweep"]]
        frontiers = {}
        for kind in KINDS:
            frontiers[kind] = {}
            for swept in protocol.swept():
                c = curve(sweep, protocol.cell_method(swept), kind, None, protocol.damage)
                if c is not None:
                    frontiers[kind][swept] = {"drops": list(c.worst_drop), "gains": list(c.gain), "strengths": list(c.strengths)}
        candidates = {}
        for candidate in protocol.candidates:
            if missing := [run["seed"] for run in runs[world] if candidate.name not in run["points"]]:
                raise PlatonicError(f"world {world}: the runs of seed(s) {', '.join(map(str, missing))} hold no point of {candidate.name}")
            candidates[candidate.name] = {kind: _point(protocol, runs[world], candidate.name, kind) for kind in KINDS}
        out[world] = {"frontiers": frontiers, "candidates": candidates}
    return out


def _point(protocol: Protocol, runs: Sequence[Mapping[str, Any]], name: str, kind: str) -> dict[str, Any]:
    pooled = _figures(protocol, [r for run in runs for r in run["points"][name]], kind)
    return {**pooled, "seeds": {str(run["seed"]): _figures(protocol, run["points"][name], kind) for run in runs}}


def _figures(protocol: Protocol, records: Sequence[Mapping[str, Any]], kind: str) -> dict[str, Any]:
    """gain, worst drop and set, cells, per-task gains of the closed form and of the labelled reference."""
    edited, reference = ([r for r in records if r["kind"] == kind and r["method"] == m] for m in POINT_METHODS)
    p, ref = point(edited, kind, protocol.damage), point(reference, kind, protocol.damage)
    if p is None or ref is None:
        raise PlatonicError(f"no {kind} cell among the candidate's records")
    drop, worst = p.worst()
    every = point(edited, kind, DAMAGE)  # each kind of kept set's worst, judged or not
    damage = {field: list(every.worst(sets)) for field in DAMAGE if (sets := {s for r in edited for s in r.get(field, ())})}
    return {"gain": p.gain, "worst_drop": drop, "worst_set": worst, "damage": damage, "cells": p.cells, "per_task": dict(p.per_task),
            "reference_per_task": dict(ref.per_task)}
