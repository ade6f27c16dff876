"""Frontiers on the worlds: each method's gain within a budget of worst control drop (docs/method.md sec. 15).

For every world and seed, the cross-family addition and negation cells (at most --max-cells per kind,
evenly spread) are swept over strengths with every method that transfers descriptors: the closed form
in each space of --spaces, the oracle, the labelled reference, Random-UTD and both alignment baselines
(--lora adds the LoRA route, fitted once per cell and scaled by each strength: minutes per cell on CPU).
Cells of all seeds are pooled; per kind, each method's curve is the mean gain on the cells' tasks
(negation: the removed task's drop) against the worst control set's mean drop (evaluate/frontier.py),
and the table prints the best gain within 1 and within 3 points of worst control drop, interpolated
between swept strengths (a dash: no swept strength keeps within it).

`--auto-rule NAME` also evaluates the closed form at the strength a registered strength rule chooses
per cell (the cell method closed_form_strength_NAME; the rule reads no label, control or test item) and
prints its (worst drop, gain) point and the frontier's gain at that drop: the closed form's curve in
the rule's space (--auto-space, default CellSettings' space), and the best over the methods a user can
run (all but the oracle and the labelled reference).

Seed 0 is the world of the shipped zoo (its fine-tunes saw the probes' world); a seed s > 0 is the
world's replicate s (evaluate/replicates.py: new items for probes, tests and controls; on the real world
the garments resplit and every source fine-tuned anew, which takes minutes).

    python benchmarks/bench_frontier.py                                  # image, audio, real; seed 0; 2 cells per kind
    python benchmarks/bench_frontier.py --worlds image --seeds 1 2 --max-cells 20 --spaces affinity blend
    python benchmarks/bench_frontier.py --auto-rule least_squares_off_task
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Sequence

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REFERENCES = ("oracle", "label_reference", "random_utd", "alignment", "alignment_lstsq")
NOT_DEPLOYABLE = ("oracle", "label_reference")  # they read what a user has not: the target's own fine-tune, probe labels


def workspace(world: str, seed: int) -> Any:
    """Seed 0: the shipped zoo's world; seed s > 0: the world's replicate s."""
    from platonic_sdk.evaluate.measure.replicates import replicate_workspace
    from platonic_sdk.evaluate.measure.workspace import zoo_workspace

    return (zoo_workspace(world, seed=0) if seed == 0 else replicate_workspace(world, seed))[0]


def cells(ws: Any, max_cells: int | None) -> list[Any]:
    """Cross-family addition and negation cells, at most `max_cells` per kind, evenly spread (as the grid picks them)."""
    from platonic_sdk.evaluate.run.runner import selected_cells
    from platonic_sdk.evaluate.plan.settings import selections

    return [c for s in selections(max_cells=max_cells) for c in selected_cells(ws, s, "auto")]


def sweep(world: str, seeds: Sequence[int], max_cells: int | None, methods: Sequence[str], strengths: Sequence[float],
          auto: str | None, auto_space: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(sweep records of every seed, the auto rule's one-point records); keys carry the seed."""
    from platonic_sdk.evaluate.measure import studies
    from platonic_sdk.evaluate.plan.settings import CellSettings

    records, points = [], []
    for seed in seeds:
        ws = workspace(world, seed)
        chosen = cells(ws, max_cells)
        records += [{**r, "key": f"{seed}/{r['key']}"} for r in studies.strength_sweep(ws, chosen, strengths, methods=methods)]
        if auto is not None:  # the rule chooses each cell's strength: one evaluation per cell, the fixed one unread
            at = studies.strength_sweep(ws, chosen, (1.0,), CellSettings(space=auto_space), methods=[auto])
            points += [{**r, "key": f"{seed}/{r['key']}"} for r in at]
    return records, points


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}"


def table(curves: dict[tuple[str, str], Any], methods: Sequence[str], labels: dict[str, str]) -> list[str]:
    """Per method: gain (removal) within 1 and 3 points of worst control drop, per kind, and the worst set at the top strength."""
    width = max(len(labels[m]) for m in methods)
    lines = [f"  {'method':<{width}} {'add <=1':>8} {'add <=3':>8} {'neg <=1':>8} {'neg <=3':>8}   worst set at the top strength (add / neg)"]
    for m in methods:
        add, neg = curves.get(("addition", m)), curves.get(("negation", m))
        cols = [fmt(c.gain_within(b)) if c is not None else "n/a" for c in (add, neg) for b in (1.0, 3.0)]
        worst = " / ".join(c.worst_set[-1] or "-" if c is not None else "n/a" for c in (add, neg))
        lines.append(f"  {labels[m]:<{width}} {cols[0]:>8} {cols[1]:>8} {cols[2]:>8} {cols[3]:>8}   {worst}")
    return lines


def auto_lines(points: list[dict[str, Any]], rule_method: str, reference: str, curves: dict[tuple[str, str], Any],
               deployable: Sequence[str]) -> list[str]:
    """The auto rule's (worst drop, gain) point per kind, and the frontier's gain at that drop: the closed form in the
    rule's space, and the best over the `deployable` methods."""
    from platonic_sdk.evaluate.measure.frontier import curve, distance

    lines = []
    for kind in ("addition", "negation"):
        found = curve(points, rule_method, kind, None)
        if found is None:
            lines.append(f"  {kind}: the rule gave no point")
            continue
        point = (found.worst_drop[0], found.gain[0])
        own = distance(curves[(kind, reference)], point) if (kind, reference) in curves else {"frontier_gain": None, "below_frontier": None}
        best = [curves[(kind, m)].gain_within(point[0]) for m in deployable if (kind, m) in curves]
        best = max((b for b in best if b is not None), default=None)
        what = "gain" if kind == "addition" else "removal"
        lines.append(f"  {kind}: {what} {point[1]:+.1f} at a worst control drop of {point[0]:.1f} ({found.worst_set[0]}); within that "
                     f"drop the frontier gives {fmt(own['frontier_gain'])} (same closed form, swept; minus the point: "
                     f"{fmt(own['below_frontier'])}), {fmt(best)} (best method a user can run)")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    from platonic_sdk.evaluate.measure.frontier import curves as all_curves
    from platonic_sdk.evaluate.report.render import method_label
    from platonic_sdk.evaluate.plan.registry import METHODS, method
    from platonic_sdk.evaluate.plan.settings import CellSettings
    from platonic_sdk.spaces import SPACES

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worlds", nargs="+", default=["image", "audio", "real"], help="worlds (default: image audio real)")
    p.add_argument("--seeds", nargs="+", type=int, default=[0], help="0: the shipped zoo's world; s > 0: replicate s (default: 0)")
    p.add_argument("--max-cells", type=int, default=2, help="cross-family cells per kind and seed, evenly spread (default: 2; 0: all)")
    p.add_argument("--spaces", nargs="+", default=list(SPACES), help=f"the closed form's descriptor spaces (default: {' '.join(SPACES)})")
    p.add_argument("--strengths", nargs="+", type=float, default=[0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0],
                   help="swept strengths (default: 0 0.25 0.5 0.75 1 1.25 1.5 2)")
    p.add_argument("--lora", action="store_true", help="also sweep the LoRA route (one fit per cell, scaled; slow on CPU)")
    p.add_argument("--auto-rule", metavar="NAME", help="a registered strength rule: its point against the frontier")
    p.add_argument("--auto-space", help="the space the rule's closed form transfers (default: CellSettings' space)")
    args = p.parse_args(argv)

    methods = [f"closed_form_{s}" for s in args.spaces] + list(REFERENCES) + (["lora"] if args.lora else [])
    for name in methods:
        method(name)  # unknown spaces fail here, before any model loads
    auto_space = CellSettings(space=args.auto_space or CellSettings().space).space  # an unknown space fails here
    rule_method = f"closed_form_strength_{args.auto_rule}" if args.auto_rule else None
    if rule_method is not None and rule_method not in METHODS:
        method(rule_method)  # the registry's error names the registered ones (or the rules are not there yet)
    labels = {m: method_label(m) for m in methods}
    budget = None if args.max_cells == 0 else args.max_cells
    print(f"bench_frontier: worlds {', '.join(args.worlds)}; seeds {' '.join(map(str, args.seeds))}; at most {budget or 'all'} "
          f"cross-family cells per kind and seed; strengths {' '.join(f'{c:g}' for c in args.strengths)}")
    for world in args.worlds:
        t0 = time.perf_counter()
        records, points = sweep(world, args.seeds, budget, methods, args.strengths, rule_method, auto_space)
        curves = {(c.kind, c.method): c for c in all_curves(records) if c.group == "cross-family"}
        cells_per_kind = {k: len({r["key"] for r in records if r["kind"] == k}) for k in ("addition", "negation")}
        print(f"\n{world} world: {cells_per_kind['addition']} addition + {cells_per_kind['negation']} negation cells "
              f"({time.perf_counter() - t0:.0f} s); mean gain (negation: removal) in points within a worst control drop of 1 / 3")
        print("\n".join(table(curves, methods, labels)))
        if rule_method is not None:
            print(f" auto rule {args.auto_rule} (closed form, {auto_space} descriptors, the strength chosen per cell):")
            print("\n".join(auto_lines(points, rule_method, f"closed_form_{auto_space}", curves,
                                       [m for m in methods if m not in NOT_DEPLOYABLE])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
