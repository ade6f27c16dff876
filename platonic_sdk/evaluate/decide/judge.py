"""Criteria, choice and hold of a protocol, judged on a figures table (figures.py's shape): pure.

Per world and candidate: each kind's control limit (worst damage set's drop <= the world's limit), then each
criterion of the protocol where it applies (protocol.Criterion). The order of preference ranks candidates by
(fewest control limits broken, fewest criteria broken, highest task score) under order "controls", or by (fewest
criteria, highest score) under "task"; the task score sums addition gain and removal over the worlds.

    choose  the best score among candidates meeting every criterion on every world; else, where every modality
            has one that meets all of its worlds, one per modality; else the first by the order of preference
            (ties: the protocol's order of candidates);
    hold    the protocol's `chosen`, on the confirmation seeds' figures: it breaks at most `max_control_limits`
            control limits, and (with `ranked_first`) no candidate ranks above it.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import attrs

from ...errors import PlatonicError
from ..measure.frontier import gain_within
from ..plan.settings import KINDS
from .protocol import Criterion, Protocol

Figures = Mapping[str, Any]  # figures.figures' shape


@attrs.frozen
class Verdict:
    """One criterion on one world and kind: met or not, the candidate's `value` against its `bound`."""

    world: str
    kind: str
    name: str
    control_limit: bool
    met: bool
    value: float | None
    bound: float | None
    detail: str = ""

    @property
    def label(self) -> str:
        return f"{self.world} {self.kind} {self.name}"


@attrs.frozen
class Choice:
    """The protocol's choice: one candidate, or None with one per modality (`per_modality`); `reason` says which rule chose."""

    candidate: str | None
    reason: str
    per_modality: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen
class Hold:
    """Whether the protocol's chosen candidate holds on the confirmation figures, and why (one line per condition)."""

    chosen: str
    holds: bool
    reasons: tuple[str, ...]


Verdicts = Mapping[str, Mapping[str, Sequence[Verdict]]]  # world -> candidate -> verdicts


def judge(protocol: Protocol, table: Figures) -> dict[str, dict[str, list[Verdict]]]:
    """Every candidate's verdicts on every world of the protocol."""
    return {w: {c.name: _verdicts(protocol, w, table[w], c.name) for c in protocol.candidates} for w in protocol.worlds}


def _verdicts(protocol: Protocol, world: str, table: Figures, name: str) -> list[Verdict]:
    out = []
    for kind in KINDS:
        p, limit = table["candidates"][name][kind], protocol.limits[world][kind]
        out.append(Verdict(world, kind, f"control limit ({limit:g})", True, p["worst_drop"] <= limit, p["worst_drop"], limit,
                           p.get("worst_set") or ""))
        out += [_criterion(c, world, kind, p, table["frontiers"][kind], limit) for c in protocol.criteria if c.applies(world, kind)]
    return out


def _criterion(c: Criterion, world: str, kind: str, p: Mapping[str, Any], frontiers: Mapping[str, Any], limit: float) -> Verdict:
    if c.type == "frontier":
        line = frontiers.get(c.method)
        if line is None:
            raise PlatonicError(f"world {world}: no {kind} frontier of {c.method} in the figures")
        x = limit if c.at == "limit" else p["worst_drop"]
        best = gain_within(line["drops"], line["gains"], x)
        bound = None if best is None else c.share * best
        met = bound is None or p["gain"] >= bound - c.tolerance
        where = f"within the limit {limit:g}" if c.at == "limit" else "at its drop"
        return Verdict(world, kind, c.name, False, met, p["gain"], bound, "" if best is None else f"{best:.1f} {where}")
    shares = {t: p["per_task"][t] / g for t, g in p["reference_per_task"].items() if g >= c.floor}
    low = min(shares.values(), default=None)
    detail = ", ".join(f"{t} {s:.0%}" for t, s in sorted(shares.items(), key=lambda ts: ts[1]) if s < c.share)
    return Verdict(world, kind, c.name, False, low is None or low >= c.share, low, c.share, detail)


def broken(verdicts: Verdicts, candidate: str, worlds: Sequence[str], limits_only: bool = False) -> list[Verdict]:
    """The verdicts `candidate` fails on `worlds` (only control limits with `limits_only`)."""
    return [v for w in worlds for v in verdicts[w][candidate] if not v.met and (v.control_limit or not limits_only)]


def score(table: Figures, candidate: str, worlds: Sequence[str]) -> float:
    """Summed task figures: addition gain plus removal on each of `worlds`."""
    return sum(table[w]["candidates"][candidate][k]["gain"] for w in worlds for k in KINDS)


def preference(protocol: Protocol, table: Figures, verdicts: Verdicts, candidate: str) -> tuple[float, ...]:
    """The candidate's key in the order of preference (larger ranks higher)."""
    worlds = protocol.worlds
    criteria, total = -len(broken(verdicts, candidate, worlds)), score(table, candidate, worlds)
    if protocol.order == "controls":
        return (-len(broken(verdicts, candidate, worlds, limits_only=True)), criteria, total)
    return (criteria, total)


def ranking(protocol: Protocol, table: Figures, verdicts: Verdicts) -> list[str]:
    """The candidates in the order of preference (ties keep the protocol's order)."""
    names = [c.name for c in protocol.candidates]
    return sorted(names, key=lambda c: preference(protocol, table, verdicts, c), reverse=True)


def choose(protocol: Protocol, table: Figures, verdicts: Verdicts) -> Choice:
    """The protocol's choice on these figures (the module's docstring)."""
    names = [c.name for c in protocol.candidates]

    def best_passing(worlds: Sequence[str]) -> str | None:
        ok = [c for c in names if not broken(verdicts, c, worlds)]
        return max(ok, key=lambda c: score(table, c, worlds)) if ok else None

    if (found := best_passing(protocol.worlds)) is not None:
        return Choice(found, "meets every criterion on every world")
    modalities = {m: [w for w in ws if w in protocol.worlds] for m, ws in protocol.modalities.items()}
    per = {m: best_passing(ws) for m, ws in modalities.items() if ws}
    if per and all(per.values()):
        return Choice(None, "per modality: " + ", ".join(f"{m} -> {c}" for m, c in per.items()), per)
    first = ranking(protocol, table, verdicts)[0]
    limits, criteria = len(broken(verdicts, first, protocol.worlds, True)), len(broken(verdicts, first, protocol.worlds))
    order = "control limits, then criteria" if protocol.order == "controls" else "criteria"
    return Choice(first, f"none meets every criterion; {first} breaks the fewest {order} ({limits} control limits, {criteria} criteria)")


def hold(protocol: Protocol, table: Figures, verdicts: Verdicts) -> Hold:
    """Whether the protocol's `chosen` candidate holds on these (confirmation) figures."""
    chosen = protocol.chosen
    if chosen is None:
        raise PlatonicError("the protocol names no chosen candidate: write the development run's choice under 'chosen' "
                            "and commit it before the confirmation seeds run")
    reasons, holds = [], True
    limits = broken(verdicts, chosen, protocol.worlds, limits_only=True)
    if protocol.max_control_limits is not None:
        ok = len(limits) <= protocol.max_control_limits
        holds &= ok
        reasons.append(f"breaks {len(limits)} control limit(s) (at most {protocol.max_control_limits})"
                       + (": " + "; ".join(v.label for v in limits) if limits else ""))
    if protocol.ranked_first:
        mine = preference(protocol, table, verdicts, chosen)
        above = [c.name for c in protocol.candidates if preference(protocol, table, verdicts, c.name) > mine]
        holds &= not above
        reasons.append("ranked first by the order of preference" if not above else f"ranked below {', '.join(above)}")
    return Hold(chosen, holds, tuple(reasons))
