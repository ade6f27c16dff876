"""Variants of the off-task strength rule, estimated on a decision run's sweeps and judged by a protocol's criteria
(docs/method.md sec. 15.1, rounds 2 and 3; the estimate is platonic_sdk/evaluate/decide/estimate.py: each variant's
strength computed exactly per cell, the cell's accuracies interpolated at it on the sweep of `--space`). An estimate,
not a measurement: the protocol measures its candidates exactly. The variants are strength-rule plug-ins
(`register_strength_rule`) beside the built-in `least_squares` (the task-only fit) and `least_squares_off_task`:

    centred_off_task   the fit reads only row-centred changes and descriptors (what an argmax sees)
    balanced_off_task  the other grids' penalty averaged over them, times the task's grids (a bigger bank lowers nothing)
    leak_off_task      the other grids held at the source fine-tune's own change there, not at zero
    leak_budget        the task-only fit, capped where the edit's change on the other grids reaches the size of the
                       source fine-tune's own change there: sqrt(sum_O w ||L_O||^2 / sum_O w ||dU_O||^2)
    other_prompts_off_task  only the other grids' affinities to prompts the task does not name are held (a
                       grid asking the task's own question on other inputs is left free)

    python benchmarks/explore_strength_rules.py benchmarks/protocols/round_3.json --read DEV   # DEV: the runner's --json
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import attrs
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


def leak_strengths(ws: Any, cell: Any, protocol: Any, space: str) -> dict[str, float]:
    """The LEAKS rules' strengths for the cell's closed form in `space`: the other grids' targets are the cell's sources'
    own changes there (their descriptors in `space` on those grids), signed and centred as the edit's."""
    from platonic_sdk import spaces
    from platonic_sdk.evaluate.decide.estimate import cell_edit
    from platonic_sdk.linalg import unit_rows
    from platonic_sdk.strength import strength_rule

    def change_on(family, task, grid_task):  # the source fine-tune's descriptor on another task's grid
        state = ws.grid_state(family, grid_task)
        scale = ws.models[family].logit_scale if spaces.space(space).needs_logit_scale else None
        return spaces.space_descriptor(space, unit_rows(state.raw_embeddings), ws.finetuned_rows(family, task, grid_task), state.landmarks, scale)

    edit, bank = cell_edit(ws, cell, protocol, space), ws.bank(cell.target)
    rows = (lambda m: m - m.mean(dim=1, keepdim=True)) if edit.centre else (lambda m: m)
    terms = (edit.descriptor.centred() if edit.centre else edit.descriptor).by_grid()
    task = [bank.probe_grid(ws.grid(t).identity, terms[ws.grid(t).identity][1]) for t in dict.fromkeys(cell.tasks)]
    others = [bank.probe_grid(ws.grid_state(cell.target, o).grid.identity,
                              rows(sum(edit.sign * change_on(s, t, o) for s, t in zip(cell.sources, cell.tasks))))
              for o in edit.others]
    return {v: strength_rule(v).choose(edit.operator, task, others) for v in LEAKS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("protocol", help="the protocol whose criteria judge the variants (its frontiers must include --space)")
    parser.add_argument("--read", nargs="+", required=True, metavar="PATH", help="the decision runner's --json outputs (their sweeps)")
    parser.add_argument("--seeds", default="development", help="which of the protocol's seeds the files hold (development, confirmation, all)")
    parser.add_argument("--space", default="blend", help="the descriptor space whose closed form the rules fold (its sweep is read)")
    args = parser.parse_args()

    from platonic_sdk.encoding.feature_store import caching
    from platonic_sdk.errors import PlatonicError
    from platonic_sdk.evaluate.decide.estimate import estimated_points, rule_strengths
    from platonic_sdk.evaluate.decide.figures import figures
    from platonic_sdk.evaluate.decide.judge import judge
    from platonic_sdk.evaluate.decide.measure import cross_family_cells
    from platonic_sdk.evaluate.decide.protocol import Candidate, load_protocol
    from platonic_sdk.evaluate.decide.runner import read_runs
    from platonic_sdk.evaluate.decide.tables import candidates_table
    from platonic_sdk.evaluate.measure.replicates import replicate_workspace

    register_variants()
    protocol = load_protocol(args.protocol)
    if args.space not in protocol.frontiers:
        raise PlatonicError(f"the protocol sweeps {', '.join(protocol.frontiers)}, not --space {args.space}")
    runs, _ = read_runs(args.read, protocol, protocol.stage_seeds(args.seeds))
    variants = attrs.evolve(protocol, candidates=tuple(Candidate(args.space, v) for v in VARIANTS), chosen=None)
    plain = [v for v in VARIANTS if v not in LEAKS]
    with caching():
        for world, held in runs.items():
            for run in held:
                ws, _ = replicate_workspace(world, run["seed"])
                chosen = {c.key: {**rule_strengths(ws, c, protocol, args.space, plain), **leak_strengths(ws, c, protocol, args.space)}
                          for c in cross_family_cells(ws, protocol.cells_per_kind)}
                run["points"] = {f"{args.space}/{v}": estimated_points(protocol, run["sweep"], {k: c[v] for k, c in chosen.items()}, args.space)
                                 for v in VARIANTS}
                print(f"{world} seed {run['seed']}: median strength " + ", ".join(
                    f"{v} {np.median([c[v] for c in chosen.values()]):.2f}" for v in VARIANTS), flush=True)
    table = figures(variants, runs)
    print(f"\nEstimated (interpolated on the {args.space} sweeps), cells pooled over seeds "
          + ", ".join(str(r["seed"]) for r in runs[protocol.worlds[0]]) + ":\n")
    print(candidates_table(variants, table, judge(variants, table)))


if __name__ == "__main__":
    main()
