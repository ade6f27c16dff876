"""Variants of the off-task strength rule on the default's development seeds, estimated (method page sec. 15.1,
rounds 2 and 3): each variant's strength is computed exactly per cell on the replicate's workspace; the cell's
accuracies at that strength are interpolated on its sweep in `--space` (blend by default) from an earlier
`decide_default.py --json` run. An estimate, not a measurement: the protocol measures its candidates exactly. It runs
low where a rule chooses more than the sweep's last strength (2: read there), and it reads the labelled reference at
the variant's strength, not at the strength the rule gives the reference's own descriptor, so criterion 3's per-task
share is only indicative. The variants are strength-rule plug-ins (`register_strength_rule`) beside the built-in
`least_squares` (the task-only fit: what "auto" reads on a bank that holds no grid outside the edit) and
`least_squares_off_task` (the default rule):

    centred_off_task   the fit reads only row-centred changes and descriptors (what an argmax sees)
    balanced_off_task  the other grids' penalty averaged over them, times the task's grids (a bigger bank lowers nothing)
    leak_off_task      the other grids held at the source fine-tune's own change there, not at zero
    leak_budget        the task-only fit, capped where the edit's change on the other grids reaches the size of the
                       source fine-tune's own change there: sqrt(sum_O w ||L_O||^2 / sum_O w ||dU_O||^2)
    other_prompts_off_task  only the other grids' affinities to prompts the task does not name are held (a
                       grid asking the task's own question on other inputs is left free)

    python benchmarks/explore_strength_rules.py --read DEV CONFIRM    # the --json files of decide_default.py's runs
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

VARIANTS = ("least_squares", "least_squares_off_task", "centred_off_task", "balanced_off_task", "leak_off_task", "leak_budget",
            "other_prompts_off_task")
LEAKS = ("leak_off_task", "leak_budget")  # rules that read the source's change on the other grids


def register_variants() -> None:
    """The variants as strength rules: c = sum_T w <dU, U> / (sum_T w ||dU||^2 + penalty), as least_squares_off_task
    (leak_budget: the task-only fit, capped)."""
    import torch

    from platonic_sdk.linalg import unit_rows
    from platonic_sdk.strength import StrengthRule, register_strength_rule
    from platonic_sdk.strength.first_order import fitted, targets, unit_change, weighted_inner

    def other_prompts(g, task):  # 1 on the columns of g whose landmark is none of the task grids' landmarks
        named = torch.cat([unit_rows(t.landmarks.double()) for t in task])
        return ((unit_rows(g.landmarks.double()) @ named.T).max(dim=1).values < 1 - 1e-6).double()

    def fit(A, task, others, centred=False, balanced=False, prompts=False):
        rows = (lambda m: m - m.mean(dim=1, keepdim=True)) if centred else (lambda m: m)
        change, off = [rows(unit_change(A, g)) for g in task], [rows(unit_change(A, g)) for g in others]
        if prompts:
            off = [d * other_prompts(g, task) for g, d in zip(others, off)]
        held = [rows(g.target.double()) if g.target is not None else 0 * d for g, d in zip(others, off)]  # leak: the source's change
        penalty = weighted_inner(others, off, off) * (len(task) / len(others) if balanced and others else 1.0)
        energy = weighted_inner(task, change, change) + penalty
        aim = weighted_inner(task, change, [rows(u) for u in targets(task)]) + weighted_inner(others, off, held)
        return max(0.0, aim / energy) if energy > 0 else 0.0

    def leak_budget(A, task, others):
        off, leak = [unit_change(A, g) for g in others], [g.target.double() for g in others]
        energy, alone = weighted_inner(others, off, off), fitted(A, task, ())
        return min(alone, (weighted_inner(others, leak, leak) / energy) ** 0.5) if energy > 0 else alone

    register_strength_rule(StrengthRule("leak_budget", leak_budget), replace=True)
    for name, options in (("centred_off_task", {"centred": True}), ("balanced_off_task", {"balanced": True}), ("leak_off_task", {}),
                          ("other_prompts_off_task", {"prompts": True})):
        register_strength_rule(StrengthRule(name, lambda A, t, o, options=options: fit(A, t, o, **options)), replace=True)


def strengths(world: str, seed: int, max_cells: int, space: str) -> dict[str, dict[str, float]]:
    """Per cell key, each variant's strength for the closed form in `space` of the cell (leak_off_task: the other grids'
    targets are the cell's sources' changes there, signed and centred as the edit's)."""
    from bench_frontier import cells as grid_cells

    from platonic_sdk import spaces
    from platonic_sdk.descriptor import Composition
    from platonic_sdk.evaluate.measure.cells import cell_solve
    from platonic_sdk.evaluate.measure.replicates import replicate_workspace
    from platonic_sdk.evaluate.spec.settings import CellSettings
    from platonic_sdk.linalg import unit_rows
    from platonic_sdk.strength import strength_rule

    def change_on(ws, family, task, grid_task):  # the source fine-tune's descriptor on another task's grid
        state = ws.grid_state(family, grid_task)
        scale = ws.models[family].logit_scale if spaces.space(space).needs_logit_scale else None
        return spaces.space_descriptor(space, unit_rows(state.raw_embeddings), ws.finetuned_rows(family, task, grid_task), state.landmarks, scale)

    ws, _ = replicate_workspace(world, seed, progress=False)
    settings, out = CellSettings(space=space), {}
    for cell in grid_cells(ws, max_cells):
        sign, centre = (1.0 if cell.kind == "addition" else -1.0), settings.centres(cell.kind)
        terms = list(zip(cell.sources, cell.tasks))
        A = sign * sum(ws.operator(cell.target, s, t, **cell_solve(ws, cell, settings, t)) for s, t in terms)
        descriptor = Composition.of(sum((sign * ws.descriptor(s, t, space) for s, t in terms[1:]), sign * ws.descriptor(*terms[0], space)))
        bank, rest = ws.bank(cell.target), [t for t in ws.transfer_tasks if t not in cell.tasks]
        out[cell.key] = {v: bank.chosen_strength(descriptor, A, v, centre, [ws.grid_state(cell.target, t).grid for t in rest])
                         for v in VARIANTS if v not in LEAKS}
        task = [bank.probe_grid(ws.grid(t).identity, (descriptor.centred() if centre else descriptor).by_grid()[ws.grid(t).identity][1])
                for t in dict.fromkeys(cell.tasks)]
        leaks = [sum(sign * change_on(ws, s, t, other) for s, t in terms) for other in rest]
        others = [bank.probe_grid(ws.grid(o).identity, (m - m.mean(dim=1, keepdim=True)) if centre else m) for o, m in zip(rest, leaks)]
        out[cell.key].update({v: strength_rule(v).choose(A, task, others) for v in LEAKS})
    return out


def estimated(records: Sequence[dict[str, Any]], chosen: dict[str, dict[str, float]], variant: str, space: str) -> list[dict[str, Any]]:
    """Candidate records (decide_default's shape) with each cell's accuracies interpolated at the variant's strength
    on the cell's `space` and labelled-reference sweeps (strengths past the sweep's end read its last point)."""
    at = lambda r, c: {k: float(np.interp(c, r["strengths"], v)) for k, v in r["accuracy"].items()}  # noqa: E731
    swept = {r["key"]: r for r in records if r["method"] == f"closed_form_{space}"}
    reference = {r["key"]: r for r in records if r["method"] == "label_reference"}
    return [{"key": k, "kind": r["kind"], "tasks": r["tasks"], "controls": r["controls"], "zero_shot": r["zero_shot"],
             "closed_form": at(r, chosen[k][variant]), "label_reference": at(reference[k], chosen[k][variant])}
            for k, r in swept.items() if k in chosen]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--read", nargs="+", required=True, metavar="PATH", help="decide_default.py --json files (their sweeps)")
    parser.add_argument("--worlds", default="image,audio,real")
    parser.add_argument("--max-cells", type=int, default=20)
    parser.add_argument("--space", default="blend", help="the descriptor space whose closed form the rules fold (its sweep is read)")
    args = parser.parse_args()
    import decide_default

    from platonic_sdk.encoding.feature_store import caching

    register_variants()
    worlds = args.worlds.split(",")
    runs = {w: [run for path in args.read for run in json.loads(Path(path).read_text())["runs"][w]] for w in worlds}
    with caching():
        for w in worlds:
            for run in runs[w]:
                chosen = strengths(w, run["seed"], args.max_cells, args.space)
                run["points"] = {f"{args.space}/{v}": estimated(run["sweep"], chosen, v, args.space) for v in VARIANTS}
                print(f"{w} seed {run['seed']}: median strength " + ", ".join(
                    f"{v} {np.median([c[v] for c in chosen.values()]):.2f}" for v in VARIANTS), flush=True)
    table = {w: {f"{args.space}/{v}": decide_default.judge(w, runs[w], f"{args.space}/{v}") for v in VARIANTS} for w in worlds}
    print(f"\nEstimated (interpolated on the {args.space} sweeps), cells pooled over seeds " + ", ".join(str(r["seed"]) for r in runs[worlds[0]]) + ":\n")
    print(decide_default.markdown(table, worlds))


if __name__ == "__main__":
    main()
