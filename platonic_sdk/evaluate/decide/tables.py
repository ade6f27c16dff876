"""The decision runner's markdown: the headline, the order of preference, every candidate's figures and the
frontiers (figures.py's table, judge.py's verdicts). The headline is what README.md and docs/method.md quote."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..measure.frontier import BUDGETS, DAMAGE, gain_within
from ..plan.settings import KINDS
from .judge import Figures, Verdicts, broken, ranking, score
from ..report.names import DAMAGE_WORDS
from .protocol import Protocol


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}"


def _span(values: Sequence[float], fmt: str = "{:+.1f}") -> str:
    return f"{fmt.format(min(values))}..{fmt.format(max(values))}" if values else "-"


def _shares(p: Mapping[str, Any], floor: float) -> list[float]:
    """The point's per-task share of the labelled reference's gain, on tasks where that reference gains `floor` or more."""
    return [p["per_task"][t] / g for t, g in p["reference_per_task"].items() if g >= floor]


def headline(protocol: Protocol, table: Figures, verdicts: Verdicts) -> str:
    """Per candidate: the control limits it breaks (pooled over seeds, every world and kind), each world's worst drops
    against their limits, and on the worlds of a reference_share criterion its per-task share of the labelled reference:
    min-max over tasks pooled, and min-max over every seed's tasks."""
    shared = [(c, w) for c in protocol.criteria if c.type == "reference_share" for w in c.worlds]
    columns = [f"{w} {', '.join(c.kinds)}: share of the labelled reference per task, pooled (per seed; tasks below {c.share:.0%})"
               for c, w in shared]
    rows = ["| " + " | ".join(["candidate", "control limits broken", "worst drop / limit (addition, negation)", *columns]) + " |",
            "|---|---|---|" + "---|" * len(shared)]
    for name in ranking(protocol, table, verdicts):
        limits = broken(verdicts, name, protocol.worlds, limits_only=True)
        drops = "; ".join(f"{w} " + ", ".join(f"{table[w]['candidates'][name][k]['worst_drop']:.1f} / {protocol.limits[w][k]:g}" for k in KINDS)
                          for w in protocol.worlds)
        cells = []
        for c, w in shared:
            points = [table[w]["candidates"][name][k] for k in c.kinds]
            pooled = [s for p in points for s in _shares(p, c.floor)]
            seeds = [s for p in points for per in p["seeds"].values() for s in _shares(per, c.floor)]
            cells.append(f"{_span(pooled, '{:.0%}')} ({_span(seeds, '{:.0%}')}; {sum(s < c.share for s in pooled)} of {len(pooled)})")
        rows.append("| " + " | ".join([name, f"{len(limits)} of {2 * len(protocol.worlds)}", drops, *cells]) + " |")
    return "\n".join(rows)


def preference_table(protocol: Protocol, table: Figures, verdicts: Verdicts) -> str:
    """The candidates in the order of preference, with what each breaks."""
    rows = ["| rank | candidate | control limits broken | criteria broken | task score | breaks |", "|---|---|---|---|---|---|"]
    for i, name in enumerate(ranking(protocol, table, verdicts), 1):
        fails = broken(verdicts, name, protocol.worlds)
        what = "; ".join(v.label + (f" ({v.detail})" if v.detail else "") for v in fails) or "none"
        rows.append(f"| {i} | {name} | {sum(v.control_limit for v in fails)} | {len(fails)} | {score(table, name, protocol.worlds):.1f} | {what} |")
    return "\n".join(rows)


def candidates_table(protocol: Protocol, table: Figures, verdicts: Verdicts) -> str:
    """Per world and candidate: gain (addition) and removal (negation) with their spread over seeds, the worst damage set's
    drop (spread; set) as the protocol judges it, the worst control set's and the worst other task's, each on its own, and
    what it breaks there."""
    rows = [f"| world | candidate | addition gain (spread) / worst drop (spread; set) | removal (spread) / worst drop (spread; set) | "
            f"{' | '.join(f'worst {DAMAGE_WORDS[f]}: addition; negation' for f in DAMAGE)} | breaks |", "|---|---|---|---|---|" + "---|" * len(DAMAGE)]
    for w in protocol.worlds:
        for c in protocol.candidates:
            kinds, points = [], [table[w]["candidates"][c.name][k] for k in KINDS]
            for p in points:
                seeds = p.get("seeds", {}).values()
                kinds.append(f"{p['gain']:+.1f} ({_span([s['gain'] for s in seeds])}) / {p['worst_drop']:.1f} "
                             f"({_span([s['worst_drop'] for s in seeds], '{:.1f}')}; {p.get('worst_set') or '-'})")
            sets = ["; ".join(_set(p.get("damage", {}).get(f)) for p in points) for f in DAMAGE]
            fails = "; ".join(f"{v.kind} {v.name}" + (f" ({v.detail})" if v.detail else "") for v in broken(verdicts, c.name, [w])) or "none"
            rows.append(f"| {w} | {c.name} | {kinds[0]} | {kinds[1]} | {' | '.join(sets)} | {fails} |")
    return "\n".join(rows)


def _set(found: Sequence[Any] | None) -> str:
    """A kind of kept set's worst [drop, name], "-" where the cells list none."""
    return "-" if not found or found[1] is None else f"{found[0]:.1f} ({found[1]})"


def frontiers_table(protocol: Protocol, table: Figures) -> str:
    """Each swept method's best gain (removal) within BUDGETS points of worst drop, per world and kind."""
    rows = ["| world | kind | method | " + " | ".join(f"within {b:g}" for b in BUDGETS) + " |", "|---|---|---|" + "---|" * len(BUDGETS)]
    for w in protocol.worlds:
        for k in KINDS:
            for method, line in table[w]["frontiers"][k].items():
                rows.append(f"| {w} | {k} | {method} | " + " | ".join(_signed(gain_within(line["drops"], line["gains"], b)) for b in BUDGETS) + " |")
    return "\n".join(rows)
