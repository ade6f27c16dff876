"""The default's decision protocol (docs/method.md sec. 15.1), as run: every candidate (descriptor space x
strength rule) on each world's replicates, the frontiers it is judged against, each criterion and the choice.

Per world and seed (evaluate/replicates.py), the cross-family cells of each kind (at most --max-cells, evenly
spread) get

- the frontiers: every space's closed form and the labelled reference swept over STRENGTHS (studies.strength_sweep;
  frontier.py: gain or removal against the worst control set's drop);
- the candidates' points: the closed form in each space at the strength each rule gives ("fixed": 0.5 on
  additions, 1.0 on negations; a registered strength rule: chosen per cell without labels), and the labelled
  reference under the same space and rule (criterion 3).

Cells are pooled over seeds (equal counts per seed, so pooled means are means over seeds); the spread is the
min-max of the per-seed figures. Nothing here is tuned: the candidates, criteria and choice rule are fixed by
the method page, and this script only measures them.

    python benchmarks/decide_default.py --seeds 1,2                      # development: the choice
    python benchmarks/decide_default.py --seeds 101,102,103 --candidates SPACE/RULE --frontiers SPACE   # confirmation
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SPACES = ("affinity", "blend", "probability", "confidence")
RULES = ("fixed", "least_squares", "least_squares_off_task", "prediction_share")
STRENGTHS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0)
LIMITS = {"image": (3.0, 5.0), "audio": (3.0, 3.0), "real": (3.0, 5.0)}  # worst control drop: addition, negation
REFERENCE_SHARE, REFERENCE_FLOOR, REMOVAL_SHARE = 0.8, 3.0, 0.9  # criterion 3 (real world)
TOLERANCE = 1e-6  # a point of the paper's own sweep lies on its frontier (rounding of the two means)


def candidate_settings(space: str, rule: str) -> Any:
    from platonic_sdk.evaluate.spec.settings import CellSettings

    return CellSettings(space=space, strength_rule=None if rule == "fixed" else rule)


def measure(world: str, seed: int, candidates: Sequence[tuple[str, str]], spaces: Sequence[str], max_cells: int,
            progress: bool) -> dict[str, Any]:
    """One replicate: sweep records of the frontier methods (the closed form in each of `spaces`, the labelled
    reference), and per candidate one record per cell (closed form and
    labelled reference accuracies per evaluation set, with the cell's zero-shot ones)."""
    from bench_frontier import cells as grid_cells  # the cross-family cells as the grid picks them

    from platonic_sdk.evaluate.measure.cells import eval_names
    from platonic_sdk.evaluate.measure.label_reference import label_reference
    from platonic_sdk.evaluate.measure.methods import closed_form
    from platonic_sdk.evaluate.measure.replicates import replicate_workspace
    from platonic_sdk.evaluate.measure.studies import strength_sweep
    from platonic_sdk.evaluate.spec.settings import CellSettings
    from platonic_sdk.progress import progress as progress_bar

    ws, describe = replicate_workspace(world, seed, progress=progress)
    cells = grid_cells(ws, max_cells)
    sweep = strength_sweep(ws, cells, STRENGTHS, CellSettings(), [*(f"closed_form_{s}" for s in spaces), "label_reference"])
    points = defaultdict(list)
    for cell in progress_bar(cells, desc=f"{world} {seed}: candidates", disable=not progress):
        names = eval_names(ws, cell)
        zero = ws.accuracies(cell.target, names)
        for space, rule in candidates:
            settings = candidate_settings(space, rule)
            points[f"{space}/{rule}"].append({
                "key": cell.key, "kind": cell.kind, "tasks": list(cell.tasks), "controls": names[len(cell.tasks):],
                "zero_shot": zero, "closed_form": closed_form(ws, cell, settings), "label_reference": label_reference(ws, cell, settings),
            })
    return {"world": world, "seed": seed, "describe": describe, "sweep": sweep, "points": dict(points)}


def point(records: Sequence[dict[str, Any]], kind: str, method: str = "closed_form") -> dict[str, Any]:
    """Mean gain (removal on negations) over the cells of `kind`, per task too, and the worst control set's mean drop."""
    rows = [r for r in records if r["kind"] == kind]
    sign = 1.0 if kind == "addition" else -1.0
    per_task, drops = defaultdict(list), defaultdict(list)
    gains = []
    for r in rows:
        res, zero = r[method], r["zero_shot"]
        gains.append(np.mean([sign * (res[t] - zero[t]) for t in r["tasks"]]))
        for t in r["tasks"]:
            per_task[t].append(sign * (res[t] - zero[t]))
        for c in r["controls"]:
            drops[c].append(zero[c] - res[c])
    by_set = {c: float(np.mean(v)) for c, v in drops.items()}
    worst = max(by_set, key=by_set.get)
    return {"gain": float(np.mean(gains)), "worst_drop": by_set[worst], "worst_set": worst,
            "per_task": {t: float(np.mean(v)) for t, v in per_task.items()}, "cells": len(rows)}


def judge(world: str, runs: Sequence[dict[str, Any]], candidate: str) -> dict[str, Any]:
    """The candidate's figures on `world` (cells pooled over the runs' seeds), its spread over seeds, and each criterion."""
    from platonic_sdk.evaluate.measure.frontier import curve

    sweep = [r for run in runs for r in run["sweep"]]
    records = [r for run in runs for r in run["points"][candidate]]
    space = candidate.split("/")[0]
    out: dict[str, Any] = {"criteria": {}}
    for kind, limit in zip(("addition", "negation"), LIMITS[world]):
        p = point(records, kind)
        seeds = [point(run["points"][candidate], kind) for run in runs]
        p["spread"] = {k: [min(s[k] for s in seeds), max(s[k] for s in seeds)] for k in ("gain", "worst_drop")}
        paper = curve(sweep, "closed_form_affinity", kind, None).gain_within(p["worst_drop"])
        own = curve(sweep, f"closed_form_{space}", kind, None)
        p["affinity_frontier_at_drop"], p["own_frontier"] = paper, own.summary()["within"]
        out[kind] = p
        out["criteria"][f"{kind} control limit ({limit:g})"] = p["worst_drop"] <= limit
        out["criteria"][f"{kind} on or above the paper's frontier"] = paper is None or p["gain"] >= paper - TOLERANCE
    if world == "real":
        ref = point(records, "addition", "label_reference")["per_task"]
        shares = {t: out["addition"]["per_task"][t] / g for t, g in ref.items() if g >= REFERENCE_FLOOR}
        out["addition"]["share_of_reference"] = shares
        out["criteria"][f"real: every task >= {REFERENCE_SHARE:.0%} of the labelled reference"] = min(shares.values(), default=1.0) >= REFERENCE_SHARE
        removal = curve(sweep, "label_reference", "negation", None).gain_within(out["negation"]["worst_drop"])
        out["negation"]["reference_removal_at_drop"] = removal
        out["criteria"][f"real: removal >= {REMOVAL_SHARE:.0%} of the labelled reference's"] = removal is None or out["negation"]["gain"] >= REMOVAL_SHARE * removal
    return out


def choose(table: dict[str, dict[str, Any]], worlds: Sequence[str], tie_break: str = "controls") -> tuple[str | None, str]:
    """The protocol's choice: the best task figures among candidates meeting every criterion on every world; else per
    modality; else, by `tie_break`, round 2's order ("controls": fewest broken control limits, then fewest broken
    criteria, then task figures) or round 1's ("task": fewest broken criteria, then task figures)."""
    def score(c: str, ws: Sequence[str]) -> float:
        return sum(table[w][c]["addition"]["gain"] + table[w][c]["negation"]["gain"] for w in ws)

    def passing(ws: Sequence[str]) -> list[str]:
        return [c for c in table[ws[0]] if all(all(table[w][c]["criteria"].values()) for w in ws)]

    if ok := passing(worlds):
        return max(ok, key=lambda c: score(c, worlds)), "meets every criterion on every world"
    modalities = {"image": [w for w in worlds if w in ("image", "real")], "audio": [w for w in worlds if w == "audio"]}
    chosen = {m: max(ok, key=lambda c: score(c, ws)) for m, ws in modalities.items() if ws and (ok := passing(ws))}
    if len(chosen) == sum(1 for ws in modalities.values() if ws):
        return None, "per modality: " + ", ".join(f"{m} -> {c}" for m, c in chosen.items())
    def broken(c: str, limits_only: bool) -> int:
        return sum(not v for w in worlds for k, v in table[w][c]["criteria"].items() if not limits_only or "control limit" in k)

    order = {"controls": lambda c: (-broken(c, True), -broken(c, False), score(c, worlds)),
             "task": lambda c: (-broken(c, False), score(c, worlds))}[tie_break]
    best = max(table[worlds[0]], key=order)
    return best, (f"none meets every criterion; {best} breaks the fewest {'control limits, then criteria' if tie_break == 'controls' else 'criteria'} "
                  f"({broken(best, True)} control limits, {broken(best, False)} criteria)")


def markdown(table: dict[str, dict[str, Any]], worlds: Sequence[str]) -> str:
    fmt = lambda v: "-" if v is None else f"{v:+.1f}"  # noqa: E731
    rows = ["| world | candidate | addition gain (spread) | worst drop (set) | removal (spread) | worst drop (set) | paper's frontier at drop, add / neg | fails |",
            "|---|---|---|---|---|---|---|---|"]
    for w in worlds:
        for c, t in table[w].items():
            a, n = t["addition"], t["negation"]
            fails = "; ".join(k for k, v in t["criteria"].items() if not v) or "none"
            rows.append(f"| {w} | {c} | {fmt(a['gain'])} ({a['spread']['gain'][0]:+.1f}..{a['spread']['gain'][1]:+.1f}) | "
                        f"{a['worst_drop']:.1f} ({a['worst_set']}) | {fmt(n['gain'])} ({n['spread']['gain'][0]:+.1f}..{n['spread']['gain'][1]:+.1f}) | "
                        f"{n['worst_drop']:.1f} ({n['worst_set']}) | {fmt(a['affinity_frontier_at_drop'])} / {fmt(n['affinity_frontier_at_drop'])} | {fails} |")
    return "\n".join(rows)


def frontiers(runs_by_world: dict[str, list[dict[str, Any]]]) -> str:
    """Each swept method's best gain within 1 and 3 points of worst control drop, per world and kind."""
    from platonic_sdk.evaluate.measure.frontier import BUDGETS, curve

    fmt = lambda v: "-" if v is None else f"{v:+.1f}"  # noqa: E731
    rows = ["| world | kind | method | " + " | ".join(f"within {b:g}" for b in BUDGETS) + " |", "|---|---|---|" + "---|" * len(BUDGETS)]
    for w, runs in runs_by_world.items():
        sweep = [r for run in runs for r in run["sweep"]]
        for kind in ("addition", "negation"):
            for m in dict.fromkeys(r["method"] for r in sweep):
                c = curve(sweep, m, kind, None)
                if c is not None:
                    rows.append(f"| {w} | {kind} | {m} | " + " | ".join(fmt(c.gain_within(b)) for b in BUDGETS) + " |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", default="image,audio,real")
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--candidates", default=None,
                        help="SPACE/RULE pairs (RULE: fixed or a registered strength rule; default: every space with every rule, "
                             "with --read: every candidate the files all hold)")
    parser.add_argument("--frontiers", default=",".join(SPACES),
                        help="spaces whose closed form is swept (the criteria read affinity's and each candidate's)")
    parser.add_argument("--max-cells", type=int, default=20, help="cross-family cells per kind, evenly spread")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", metavar="PATH", help="write every record and figure here")
    parser.add_argument("--read", metavar="PATH", nargs="+",
                        help="judge the runs of earlier --json files instead of measuring (several: their seeds pooled, the candidates all of them hold)")
    parser.add_argument("--tie-break", choices=("controls", "task"), default="controls",
                        help="where no candidate meets every criterion: round 2's order (fewest broken control limits first; default) or round 1's")
    parser.add_argument("--progress", action="store_true")
    args = parser.parse_args()
    import torch

    from platonic_sdk.encoding.feature_store import caching

    torch.set_num_threads(args.threads)
    worlds, seeds = args.worlds.split(","), [int(s) for s in args.seeds.split(",")]
    candidates = [tuple(c.split("/")) for c in (args.candidates or ",".join(f"{s}/{r}" for s in SPACES for r in RULES)).split(",")]
    spaces = list(dict.fromkeys(["affinity", *args.frontiers.split(","), *(s for s, _ in candidates)]))
    runs: dict[str, list[dict[str, Any]]] = {}
    if args.read:
        earlier = [json.loads(Path(path).read_text()) for path in args.read]
        runs = {w: [run for e in earlier for run in e["runs"][w]] for w in worlds}
        seeds = [s for e in earlier for s in e["seeds"]]
        held = [c for c in dict.fromkeys(c for w in worlds for run in runs[w] for c in run["points"])
                if all(c in run["points"] for w in worlds for run in runs[w])]
        candidates = [tuple(c.split("/")) for c in held if args.candidates is None or c in args.candidates.split(",")]
    with caching():
        for w in worlds if not args.read else ():
            for seed in seeds:
                started = time.perf_counter()
                runs.setdefault(w, []).append(measure(w, seed, candidates, spaces, args.max_cells, args.progress))
                print(f"{w} seed {seed}: {time.perf_counter() - started:.0f} s", flush=True)
    table = {w: {f"{s}/{r}": judge(w, runs[w], f"{s}/{r}") for s, r in candidates} for w in worlds}
    print("\nFrontiers (cells pooled over seeds " + ", ".join(map(str, seeds)) + "):\n\n" + frontiers(runs))
    print("\nCandidates:\n\n" + markdown(table, worlds))
    chosen, why = choose(table, worlds, args.tie_break)
    print(f"\nchoice: {chosen or '-'} ({why})")
    if args.json:
        Path(args.json).write_text(json.dumps({"seeds": seeds, "runs": runs, "table": table, "choice": [chosen, why]}, indent=1))


if __name__ == "__main__":
    main()
