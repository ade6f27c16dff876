"""Keep sets and budgets on the development replicates (docs/method.md sec. 18): what the strength rules would give, and
the frontier they are judged against, from exact curves over a fine grid of strengths.

`measure` writes, per world and replicate, for every cross-family cell of each kind (the closed form in the default
space, centred and anchored as the cell methods are):

- on each evaluation set's TEST split (the cell's tasks and its kept sets: the other transfer tasks and the controls),
  the number of items right at every strength of GRID (exact: an argmax of a + c b, strength/budget.py);
- on each kept set's labelled TRAIN split (the keep split a rule may read; never a scored item), the flips right ->
  wrong and wrong -> right at every strength of GRID;
- the first-order energies of the least-squares rules (strength/first_order.py), so that any off-task variant's strength
  is num / (task + sum of the held sets' energies): raw and row-centred, on the other transfer tasks' probe grids and on
  the kept sets' train items read as unlabelled probes, with their numbers of probes.

`judge` reads those files and prints, per world and kind (cells pooled over the replicates), the frontier (best mean
gain whose worst kept set's mean test drop is within the world's limit, common strength per kind), and each rule's mean
gain, worst-set drop and share of the frontier. A world of shipped items (real, real_audio) keeps the whole train pool of each
task (the workspace's train split holds only its probes); the real world's controls ship 4 train items per class.

    python benchmarks/explore_keep_sets.py measure --worlds image,audio,real --seeds 1,2 --out OUT
    python benchmarks/explore_keep_sets.py judge OUT/*.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

GRID = tuple(k / 64 for k in range(0, 513))  # 0 .. 8
LIMITS = {"image": (3.0, 5.0), "audio": (3.0, 3.0), "real": (3.0, 5.0), "audio_shared": (3.0, 3.0), "real_audio": (3.0, 5.0)}  # worst drop: addition, negation
SHARED = {"raised_notes": "raised_notes_timbres", "raised_melodies": "raised_melodies_timbres"}  # audio_shared: the same clips by timbre


# ---------------------------------------------------------------------------------------------------- measuring
def keep_splits(world: str, seed: int, ws: Any, names: Sequence[str]) -> dict[str, Any]:
    """The labelled train split of each kept set (a world of shipped items: the whole train pool of the replicate's
    resplit, where the workspace's train split holds only its probes)."""
    from platonic_sdk.worlds.registry import world_spec

    spec = world_spec("audio" if world == "audio_shared" else world)
    if getattr(spec.make, "replicate_probes", None) is None:
        return {n: ws.tasks[n].train for n in names}
    whole = spec.make(seed=seed, resplit=True)
    return {n: whole.task(n).train if n in whole.task_names else ws.tasks[n].train for n in names}


def shared_inputs(ws: Any) -> list[str]:
    """audio_shared: each raised task's clips labelled by their timbre, a task of its own whose grid holds the raised
    task's very probes (with the timbre prompts): an edit of the raised task moves the kept grid's inputs themselves."""
    from platonic_sdk.tasks import Grid, Split, Task
    from platonic_sdk.worlds.audio import MELODY, TIMBRE, TIMBRE_NAMES

    for base, name in SHARED.items():
        task = ws.tasks[base]
        relabel = lambda split: Split(split.items, [TIMBRE_NAMES.index(s.timbre) for s in split.items.sounds])  # noqa: E731
        ws.tasks[name] = Task(name, TIMBRE_NAMES, relabel(task.train), relabel(task.test), (MELODY if "melodies" in base else TIMBRE,))
        grid = ws.grid(base)
        ws._grids[name] = Grid(name, grid.probe_ids, ws.tasks[name].prompts(), grid.items)
    return list(SHARED.values())


def right_counts(view: Any, labels: np.ndarray, A: Any) -> np.ndarray:
    """Items right at each strength of GRID (C)."""
    import torch

    from platonic_sdk.strength.budget import predictions

    return (predictions(view, A, GRID) == torch.as_tensor(labels).reshape(1, -1)).sum(dim=1).numpy()


def flip_counts(view: Any, labels: np.ndarray, A: Any) -> tuple[list[int], list[int]]:
    """(right -> wrong, wrong -> right) per strength of GRID."""
    import torch

    from platonic_sdk.strength.budget import predictions

    right = predictions(view, A, GRID) == torch.as_tensor(labels).reshape(1, -1)
    return (right[:1] & ~right).sum(dim=1).tolist(), (~right[:1] & right).sum(dim=1).tolist()


def energies(A: Any, views: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per view: (1/M) ||dU||^2, raw and row-centred (first-order change per unit strength)."""
    from platonic_sdk.strength.first_order import unit_change

    out = {}
    for name, v in views.items():
        d = unit_change(A, v)
        c = d - d.mean(dim=1, keepdim=True)
        m = v.landmarks.shape[0]
        out[name] = {"raw": float((d * d).sum() / m), "centred": float((c * c).sum() / m), "probes": d.shape[0]}
    return out


def measure(world: str, seed: int, max_cells: int) -> dict[str, Any]:
    """One replicate's cells: test curves, keep-split flips and the least-squares energies."""
    from bench_frontier import cells as grid_cells
    from platonic_sdk.descriptor import Composition
    from platonic_sdk.evaluate.measure.cells import cell_solve
    from platonic_sdk.evaluate.measure.feature_cache import FeatureCache
    from platonic_sdk.evaluate.measure.replicates import replicate_workspace
    from platonic_sdk.evaluate.plan.settings import CellSettings
    from platonic_sdk.strength import ProbeGrid
    from platonic_sdk.strength.first_order import targets, unit_change, weighted_inner

    ws, _ = replicate_workspace("audio" if world == "audio_shared" else world, seed)
    settings = CellSettings()
    shared = shared_inputs(ws) if world == "audio_shared" else []
    kept_names = [*ws.transfer_tasks, *ws.controls, *shared]
    splits = keep_splits(world, seed, ws, kept_names)
    keep_views: dict[tuple[str, str], tuple[Any, np.ndarray]] = {}
    test_views: dict[tuple[str, str], tuple[Any, np.ndarray]] = {}

    def keep_view(target: str, name: str) -> tuple[Any, np.ndarray]:
        if (target, name) not in keep_views:
            cache = FeatureCache.build(ws.models[target], splits[name], batch_size=ws.batch_size)
            keep_views[target, name] = ProbeGrid(cache.site_inputs, cache.raw_embeddings, ws.landmarks(target, name)), cache.labels
        return keep_views[target, name]

    def test_view(target: str, name: str) -> tuple[Any, np.ndarray]:
        if (target, name) not in test_views:
            cache = ws.eval_set(target, name)
            test_views[target, name] = ProbeGrid(cache.site_inputs, cache.raw_embeddings, ws.landmarks(target, name)), cache.labels
        return test_views[target, name]

    records = []
    for cell in grid_cells(ws, max_cells):
        sign, centre = (1.0 if cell.kind == "addition" else -1.0), settings.centres(cell.kind)
        terms = list(zip(cell.sources, cell.tasks))
        A = sign * sum(ws.operator(cell.target, s, t, **cell_solve(ws, cell, settings, t)) for s, t in terms)
        composition = Composition.of(sum((sign * ws.descriptor(s, t) for s, t in terms[1:]), sign * ws.descriptor(*terms[0])))
        bank = ws.bank(cell.target)
        by_grid = (composition.centred() if centre else composition).by_grid()
        task = [bank.probe_grid(gid, target) for gid, (_, target) in by_grid.items()]
        changes = [unit_change(A, g) for g in task]
        centred = [d - d.mean(dim=1, keepdim=True) for d in changes]
        kept = [n for n in kept_names if n not in cell.tasks]
        others = [n for n in [*ws.transfer_tasks, *shared] if n not in cell.tasks]
        record = {
            "key": cell.key, "kind": cell.kind, "group": cell.group, "target": cell.target, "tasks": list(cell.tasks), "kept": kept,
            "controls": list(ws.controls),
            "test": {n: {"n": len(test_view(cell.target, n)[1]), "right": right_counts(*test_view(cell.target, n), A).tolist()}
                     for n in [*cell.tasks, *kept]},
            "keep": {},
            "fit": {"num": weighted_inner(task, changes, targets(task)), "task": weighted_inner(task, changes, changes),
                    "task_probes": sum(d.shape[0] for d in changes),
                    "num_centred": weighted_inner(task, centred, targets(task)), "task_centred": weighted_inner(task, centred, centred),
                    "grids": energies(A, {n: bank.probe_grid(ws.grid_state(cell.target, n).grid.identity) for n in others}),
                    "keep": energies(A, {n: keep_view(cell.target, n)[0] for n in kept})},
        }
        for n in kept:
            view, labels = keep_view(cell.target, n)
            down, up = flip_counts(view, labels, A)
            record["keep"][n] = {"n": len(labels), "down": down, "up": up}
        records.append(record)
    return {"world": world, "seed": seed, "grid": list(GRID), "cells": records}


# ---------------------------------------------------------------------------------------------------- judging
Rule = Callable[[dict[str, Any], str], float]  # (cell record, world) -> strength


def accuracy_at(record: dict[str, Any], name: str, c: float) -> float:
    """Test accuracy (percent) of `name` at strength c, linear between grid strengths."""
    t = record["test"][name]
    return float(np.interp(c, GRID, 100.0 * np.asarray(t["right"]) / t["n"]))


def point(records: Sequence[dict[str, Any]], strengths: Sequence[float], limit: float) -> dict[str, Any]:
    """Mean gain (removal) over the cells at their strengths, the worst kept set's mean test drop, and the shares of
    (cell, kept set) pairs and of cells whose test drop exceeds `limit`."""
    gains, drops, over = [], defaultdict(list), []
    for r, c in zip(records, strengths):
        sign = 1.0 if r["kind"] == "addition" else -1.0
        gains.append(np.mean([sign * (accuracy_at(r, t, c) - accuracy_at(r, t, 0.0)) for t in r["tasks"]]))
        for k in r["kept"]:
            drops[k].append(accuracy_at(r, k, 0.0) - accuracy_at(r, k, c))
        over.append([accuracy_at(r, k, 0.0) - accuracy_at(r, k, c) > limit for k in r["kept"]])
    by_set = {k: float(np.mean(v)) for k, v in drops.items()}
    worst = max(by_set, key=by_set.get)
    return {"gain": float(np.mean(gains)), "drop": by_set[worst], "set": worst, "strength": float(np.median(strengths)),
            "sets_over": float(np.mean([x for row in over for x in row])), "cells_over": float(np.mean([any(row) for row in over]))}


def frontier(records: Sequence[dict[str, Any]], limit: float) -> float | None:
    """The best mean gain over common strengths whose worst kept set's mean test drop is within `limit` (frontier.py)."""
    from platonic_sdk.evaluate.measure.frontier import curve

    sweep = [{"method": "closed_form", "kind": r["kind"], "group": r["group"], "tasks": r["tasks"], "controls": r["kept"],
              "zero_shot": {n: 100.0 * t["right"][0] / t["n"] for n, t in r["test"].items()}, "strengths": list(GRID),
              "accuracy": {n: [100.0 * x / t["n"] for x in t["right"]] for n, t in r["test"].items()}} for r in records]
    return curve(sweep, "closed_form", records[0]["kind"], None).gain_within(limit)


def per_cell_frontier(records: Sequence[dict[str, Any]], limit: float) -> float:
    """The mean over cells of each cell's best gain at a strength whose worst kept set's test drop (that cell's) is within
    `limit`: the ceiling of a rule that keeps every edit within the limit."""
    best = []
    for r in records:
        sign = 1.0 if r["kind"] == "addition" else -1.0
        acc = {n: 100.0 * np.asarray(t["right"]) / t["n"] for n, t in r["test"].items()}
        gain = sign * np.mean([acc[t] - acc[t][0] for t in r["tasks"]], axis=0)
        worst = np.max([acc[k][0] - acc[k] for k in r["kept"]], axis=0)
        best.append(float(gain[worst <= limit].max()))
    return float(np.mean(best))


def shares_inputs(r: dict[str, Any], name: str) -> bool:
    """Whether the kept grid `name` holds the cell's task probes themselves (audio_shared's relabelled grids)."""
    return any(SHARED.get(t) == name for t in r["tasks"])


def off_task(held: Callable[[dict[str, Any]], Sequence[str]], which: str = "grids", centred_held: bool = False,
             centred_task: bool = False, centred_shared: bool = False, per_probe: bool = False) -> Rule:
    """num / (task + sum of the held sets' energies): the off-task least-squares strength over the sets `held` names
    (`centred_shared`: a grid on the task's own probes held by its row-centred change alone; `per_probe`: each held
    set's energy as its mean over its items times the task's probe count, so that a set weighs alike at any size)."""
    def rule(r: dict[str, Any], world: str) -> float:
        f = r["fit"]
        num, task = (f["num_centred"], f["task_centred"]) if centred_task else (f["num"], f["task"])
        centred = lambda n: centred_held or centred_shared and shares_inputs(r, n)  # noqa: E731
        scale = lambda n: f["task_probes"] / f[which][n]["probes"] if per_probe else 1.0  # noqa: E731
        energy = task + sum(scale(n) * f[which][n]["centred" if centred(n) else "raw"] for n in held(r))
        return max(0.0, num / energy) if energy > 0 else 0.0
    return rule


def budget_rule(confidence: float, cap: Callable[[dict[str, Any]], float] | None = None, end: float = 4.0, first: bool = True,
                small: str = "hold", kinds: Sequence[str] = ("addition",), usable: str = "one") -> Rule:
    """The budget rule at the world's limit for the cell's kind: the first crossing of any labelled kept set's bound
    (`first` False: the last strength under it), capped by `cap` on the cells of `kinds`, searched up to `end`. Kept
    sets too small (`usable` "one": one flipped item reads over the budget, as the library reads them; "none": even an
    unflipped set does) are left out (`small` "drop") or held by the off-task fit over them ("hold")."""
    import torch

    from platonic_sdk.strength.budget import drop_bound, fewest_items, first_crossing, z_score

    z = z_score(confidence)

    def rule(r: dict[str, Any], world: str) -> float:
        budget = LIMITS[world][r["kind"] != "addition"]
        need = fewest_items(budget, confidence) if usable == "one" else (100 * z * 2 ** 0.5 / budget) - 2
        big = [n for n, k in r["keep"].items() if k["n"] >= need]
        tiny = [n for n in r["keep"] if n not in big]
        end_here = min(end, cap(r)) if cap is not None and r["kind"] in kinds else end
        if small == "hold" and tiny:
            end_here = min(end_here, off_task(lambda _: tiny, "keep")(r, world))
        upto = [i for i, c in enumerate(GRID) if c <= end_here + 1e-12]
        if not big:
            return GRID[upto[-1]]
        bounds = torch.stack([drop_bound(torch.tensor(r["keep"][n]["down"])[upto], torch.tensor(r["keep"][n]["up"])[upto],
                                         r["keep"][n]["n"], z)[1] for n in big])
        if first:
            return GRID[max(first_crossing(bounds, budget), 0)]
        under = (bounds <= budget).all(dim=0).nonzero()
        return GRID[int(under[-1])] if len(under) else 0.0
    return rule


def rules() -> dict[str, Rule]:
    """The rules judged: label-free (today's `auto` and variants) and the budget rule (the library's: confidence 0.7,
    additions capped at the task-only fit; then one change at a time)."""
    from platonic_sdk.strength.budget import DEFAULT_CONFIDENCE

    others = lambda r: [n for n in r["fit"]["grids"]]  # noqa: E731  the other transfer tasks' grids (what auto reads in cells)
    kept = lambda r: list(r["keep"])  # noqa: E731  every kept set's train items as unlabelled probes
    task_only = off_task(lambda r: [])
    capped = lambda r: task_only(r, "")  # noqa: E731
    q = DEFAULT_CONFIDENCE
    out: dict[str, Rule] = {
        "auto (off-task, other grids)": off_task(others),
        "off-task, other grids held centred": off_task(others, centred_held=True),
        "off-task, grids on the task's inputs held centred": off_task(others, centred_shared=True),
        "off-task, all centred (round 2)": off_task(others, centred_held=True, centred_task=True),
        "off-task, other grids per probe": off_task(others, per_probe=True),
        "off-task, kept sets as probes": off_task(kept, "keep"),
        "off-task, kept sets as probes per probe": off_task(kept, "keep", per_probe=True),
        "task-only fit": task_only,
    }
    out.update({f"budget q={c:.2f}": budget_rule(c, cap=capped) for c in (0.5001, 0.6, q, 0.84, 0.9, 0.95)})
    out.update({
        "budget, no cap": budget_rule(q),
        "budget, cap 2x the task-only fit": budget_rule(q, cap=lambda r: 2 * task_only(r, "")),
        "budget, last strength under the bound": budget_rule(q, cap=capped, first=False),
        "budget, sets too small left out": budget_rule(q, cap=capped, small="drop"),
        "budget, sets read with labels where nothing flipped reads within the budget": budget_rule(q, cap=capped, usable="none"),
        "budget, search to 2": budget_rule(q, cap=capped, end=2.0),
        "budget, search to 8": budget_rule(q, cap=capped, end=8.0),
    })
    return out


def kept_only(record: dict[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """The cell as if only the kept sets `names` were kept (and judged)."""
    kept = [n for n in record["kept"] if n in names]
    return {**record, "kept": kept, "keep": {n: record["keep"][n] for n in kept},
            "fit": {**record["fit"], "keep": {n: record["fit"]["keep"][n] for n in kept}}}


def judge(paths: Sequence[str], only: str | None, tasks: Sequence[str], controls_only: bool) -> None:
    runs = [json.loads(Path(p).read_text()) for p in paths]
    if controls_only:
        runs = [{**run, "cells": [kept_only(r, r["controls"]) for r in run["cells"]]} for run in runs]
    worlds = list(dict.fromkeys(run["world"] for run in runs))
    table = rules()
    for world in worlds:
        cells = [r for run in runs if run["world"] == world for r in run["cells"] if not tasks or set(tasks) & set(r["tasks"])]
        seeds = sorted({run["seed"] for run in runs if run["world"] == world})
        for kind, limit in zip(("addition", "negation"), LIMITS[world]):
            records = [r for r in cells if r["kind"] == kind]
            best, per_cell = frontier(records, limit), per_cell_frontier(records, limit)
            print(f"\n{world} {kind} (seeds {','.join(map(str, seeds))}; {len(records)} cells; limit {limit:g}): frontier {best:+.1f}, "
                  f"per cell {per_cell:+.1f}")
            print("| rule | gain | worst drop (set) | median strength | share | per-cell share | within | kept sets / cells over the limit "
                  "on test |\n|---|---|---|---|---|---|---|---|")
            for name, rule in table.items():
                if only and only not in name:
                    continue
                p = point(records, [rule(r, world) for r in records], limit)
                ok = p["drop"] <= limit and p["gain"] >= 0.7 * best
                print(f"| {name} | {p['gain']:+.1f} | {p['drop']:.2f} ({p['set']}) | {p['strength']:.2f} | {p['gain'] / best:.0%} | "
                      f"{p['gain'] / per_cell:.0%} | "
                      f"{'yes' if ok else 'no'} | {p['sets_over']:.1%} / {p['cells_over']:.0%} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--worlds", default="image,audio,real")
    m.add_argument("--seeds", default="1,2")
    m.add_argument("--max-cells", type=int, default=20)
    m.add_argument("--out", required=True)
    j = sub.add_parser("judge")
    j.add_argument("paths", nargs="+")
    j.add_argument("--only", help="the rules whose name holds this")
    j.add_argument("--cells-with", default="", help="only the cells with one of these tasks (comma-separated)")
    j.add_argument("--controls-only", action="store_true", help="keep (and judge) the controls alone")
    args = parser.parse_args()
    if args.command == "judge":
        return judge(args.paths, args.only, [t for t in args.cells_with.split(",") if t], args.controls_only)
    import torch

    from platonic_sdk.encoding.feature_store import caching

    torch.set_num_threads(1)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    with caching():
        for world in args.worlds.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                started = time.perf_counter()
                out = Path(args.out) / f"{world}-{seed}.json"
                out.write_text(json.dumps(measure(world, seed, args.max_cells)))
                print(f"{world} seed {seed}: {time.perf_counter() - started:.0f} s -> {out}", flush=True)


if __name__ == "__main__":
    main()
