"""The markdown of a run's studies: the closed form's strength sweep, the frontiers with the run's own point on
each, accumulation, held-out transfer, the guarantee diagnostic and the OrthoReg study.

The studies other than the frontier's point fold at the fixed strengths, whatever the run's strength rule: the
sweep fixes each strength it tries, and accumulation, held-out transfer and the guarantee use the fixed ones.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..measure import frontier
from .cell_tables import figure_link
from .names import DAMAGE_WORDS, KEPT, ORDER, SLOTS, chosen_words, damage_fields, method_label, rule_name, strength_str
from .text import mean, plural, table

NO_RULE = " The studies fold at the fixed strengths: the strength rule chooses only the cells' strengths."


def sweep_section(records: Sequence[dict[str, Any]], summary: Mapping[str, Any], rule: str | None = None, space: str | None = None) -> str:
    """The closed form's sweep: per strength and kind the mean accuracy on the tasks, the control sets' mean, the worst
    control set's drop and the worst other task's (each with its name: the set a mean over the sets hides)."""
    ours = [r for r in records if r["method"] == "closed_form"]
    fields = damage_fields(f for r in ours for f in DAMAGE_WORDS if r.get(f))
    worst = {kind: [frontier.curve(ours, "closed_form", kind, None, (field,)) for field in fields] for kind in SLOTS}
    rows = []
    for c in sorted({c for r in ours for c in r["strengths"]}):
        row: list[Any] = [f"{c:g}"]
        for kind, curves in worst.items():
            sel = [(r, r["strengths"].index(c)) for r in ours if r["kind"] == kind and c in r["strengths"]]
            if not sel:
                row += [None] * (2 + len(curves))
                continue
            i = curves[0].strengths.index(c)
            row += [mean([mean([r["accuracy"][t][j] for t in r["tasks"]]) for r, j in sel]),
                    mean([mean([r["accuracy"][n][j] for n in r["controls"]]) for r, j in sel]),
                    *(f"{curve.worst_drop[i]:.2f} ({curve.worst_set[i]})" if curve.worst_set[i] else None for curve in curves)]
        rows.append(row)
    header = ["strength", *(h for kind, task in (("addition", "tasks"), ("negation", "removed task"))
                            for h in (f"{kind}: {task} (%)", f"{kind}: controls, mean (%)",
                                      *(f"{kind}: worst {word} drop (points, {word.split()[-1]})" for word in (DAMAGE_WORDS[f] for f in fields))))]
    own = ("" if rule is None else f" The run's own closed form took each cell's strength from {rule_name(rule)}, so it has no one "
           "strength here: its point is on the frontier below.")
    return (f"## Strength sweep ({method_label('closed_form', space)}, every cell at each fixed strength)\n\nMean accuracy over the swept cells; the worst "
            "control drop is the largest mean drop from zero-shot of one control set, named beside it; the worst other task "
            "drop, of one transfer task the cell does not edit." + own + "\n\n"
            + table(header, rows) + figure_link(summary, "sweep"))


def frontier_section(summary: Mapping[str, Any]) -> str:
    """Per kind and group: each swept method's best gain within 1 and 3 points of worst kept set's drop, and the run's
    own point (each cell at the strength the run used) with its worst control set and worst other task; then the figure."""
    parts = [f"## Frontiers: gain against the worst {KEPT}'s drop",
             "Each method that transfers descriptors, swept over the strengths above on the same cells: per strength, the mean "
             f"gain on the cells' tasks over zero-shot (negation: the removed task's drop) against the worst {KEPT}'s drop "
             "(a control set or a transfer task the cell does not edit: the set that loses most, mean over the cells that keep "
             "it; not the mean over the sets). \"within 1\" and "
             f"\"within 3\": the best gain whose worst {KEPT}'s drop is at most 1 or 3 points, linear between two swept "
             "strengths (a dash: no swept strength keeps within it). A fixed strength cannot tell a better direction from "
             "a bigger push; the frontier can."
             + (" The LoRA route is fitted once per cell and its edit scaled by each strength, as the run scales it."
                if any("lora" in methods for methods in summary["frontier"].values()) else ""),
             "The run's point: the same cells, each edited at the strength the run used (the fixed one, or the one the "
             "strength rule chose for it); a dash where the run has no such point (a method that would follow the rule, "
             "swept only). \"own frontier there\": the best gain the method's own sweep reaches within the point's worst "
             "drop. Every column is in accuracy points but the cells and the set's name."]
    for methods in summary["frontier"].values():
        first = next(iter(methods.values()))
        what = "gain" if first["kind"] == "addition" else "removal"
        points = [v.get("point") or {"damage": {}} for v in methods.values()]
        fields = damage_fields(f for p in points for f in p["damage"])
        rows = []
        for v, p in zip(methods.values(), points):
            damage = [x for field in fields for x in p["damage"].get(field, (None, None))]
            rows.append([v["label"], v["cells"], v["within"].get("1"), v["within"].get("3"), strengths_of(v.get("point")),
                         p.get("gain"), *damage, p.get("frontier_gain")])
        parts.append(f"### {first['kind'].capitalize()}, {first['group']}\n\n" + table(
            ["method", "cells", f"{what} within 1", f"{what} within 3", "run's strengths", f"run's {what}",
             *(h for word in (DAMAGE_WORDS[f] for f in fields) for h in (f"worst {word}'s drop there", f"worst {word} there")),
             "own frontier there"], rows))
    return "\n\n".join(parts) + figure_link(summary, "frontier")


def strengths_of(point: Mapping[str, Any] | None) -> str | None:
    """A run's point's strengths in words: "0.5" (fixed) or "chosen per cell by auto"."""
    if point is None:
        return None
    return strength_str(point["strength"]) if point["rule"] is None else chosen_words(point["rule"])


def accumulation_section(records: Sequence[dict[str, Any]], summary: Mapping[str, Any], rule: str | None = None) -> str:
    rows = []
    for J in sorted({r["J"] for r in records}):
        row: list[Any] = [J]
        for schedule in ("fixed", "divided"):
            sel = [r for r in records if r["J"] == J and r["schedule"] == schedule]
            norm = [r["mean_normalised"] for r in sel if r["mean_normalised"] is not None]
            row += [mean([r["mean_accuracy"] for r in sel]), mean(norm), mean([r["control_mean"] for r in sel])]
        zero = [r["zero_shot_normalised"] for r in records if r["J"] == J and r["schedule"] == "fixed" and r["zero_shot_normalised"] is not None]
        rows.append(row + [mean(zero)])
    c = next((r["strength"] for r in records if r["schedule"] == "fixed"), None)
    s = "strength" if c is None else strength_str(c)
    header = ["J", f"{s}: accuracy (%)", f"{s}: normalised (%)", f"{s}: controls (%)", f"{s}/J: accuracy (%)", f"{s}/J: normalised (%)",
              f"{s}/J: controls (%)", "zero-shot normalised (%)"]
    targets = sorted({r["target"] for r in records})
    return (f"## Accumulation (targets: {', '.join(targets)})\n\nJ tasks composed on each target, folded at the fixed strength {s} "
            f"and at {s} / J; normalised: accuracy over the target's own fine-tuned accuracy, mean over the J tasks."
            + (NO_RULE if rule else "") + "\n\n" + table(header, rows) + figure_link(summary, "accumulation"))


def held_out_section(held: Mapping[str, Any], rule: str | None = None) -> str:
    rows = [[t, v["zero_shot"], v["closed_form"], None, None] for t, v in held["per_target"].items()]
    rows.append(["all", held["zero_shot"], held["closed_form"], held["control_zero_shot"], held["control_closed_form"]])
    at = f", the closed form at the fixed strength {strength_str(held['strength'])}" if "strength" in held else ""
    return (f"## Held-out transfer ({' + '.join(held['related'])} -> {held['task']}, never fitted; "
            f"{plural(held['records'], 'target x source pair')}{at})\n\nThe two related tasks' operators summed and evaluated on a "
            "task whose items and class names entered no fit; accuracy in %." + (NO_RULE if rule else "") + "\n\n"
            + table(["target", "held-out: zero-shot", "held-out: closed form", "control: zero-shot", "control: closed form"], rows))


def guarantee_section(records: Sequence[dict[str, Any]]) -> str:
    rows = []
    keys = ("guaranteed", "changed", "bound", "lost", "observed_loss")
    for kind, group in ORDER:
        sel = [r for r in records if r["kind"] == kind and r["group"] == group]
        if sel:
            pooled = [r["pooled"] for r in sel]
            rows.append([kind, group, len(sel), strength_str(sel[0]["strength"])] + [mean([s[k] for s in pooled]) for k in keys]
                        + [sum(s["violations"] for s in pooled)])
    holds = all(r["pooled"]["lost"] <= r["pooled"]["bound"] + 1e-9 and r["pooled"]["violations"] == 0 for r in records)
    header = ["kind", "group", "cells", "fixed strength", "guaranteed %", "changed %", "bound (points)", "lost (points)",
              "net loss (points)", "violations"]
    return (
        "## Guarantee diagnostic (closed form)\n\n"
        "An item is guaranteed when its top-1 margin exceeds 2 ||f' - f|| (unit landmarks move no logit by more).\n"
        "bound = correct items without the guarantee; lost = correct items that became wrong; net loss = accuracy before - after.\n\n"
        + table(header, rows) + f"\n\nThe bound {'holds on every record' if holds else 'VIOLATED on some record'} ({plural(len(records), 'record')})."
    )


def orthoreg_section(study: dict[str, Any]) -> str:
    """Per merging method and lambda: task-vector cosine, the strength chosen on validation, the merged model's
    accuracy; with a negation part, per method and lambda the means over negated tasks."""
    methods = list(dict.fromkeys(r["method"] for r in study["runs"]))
    runs = sorted(study["runs"], key=lambda r: methods.index(r["method"]))  # by method, then lambda
    rows = [[r["method"], r["orthoreg"], r["mean_cosine"], f"{r['strength']:.2f}" + (" (grid top)" if r["strength"] >= r["grid_top"] else ""),
             r["merged_mean"], r["normalised"]] for r in runs]
    out = (f"## OrthoReg study ({study['family']}, weight-space addition of {', '.join(study['tasks'])}; "
           "strength chosen on validation per method, the grid grown while the pick is its top)\n\n"
           + table(["merging method", "lambda", "mean pairwise cosine", "strength", "merged accuracy (%)", "normalised accuracy (merged / fine-tuned)"], rows))
    if study.get("negation"):
        groups = {(r["method"], r["orthoreg"]): [] for r in sorted(study["negation"], key=lambda r: methods.index(r["method"]))}
        for r in study["negation"]:
            groups[(r["method"], r["orthoreg"])].append(r)
        rows = [[m, lam, mean([r["strength"] for r in rs]), mean([r["zero_shot"][r["task"]] for r in rs]), mean([r["removed"] for r in rs]),
                 mean([r["zero_shot"][study["control"]] for r in rs]), mean([r["control"] for r in rs])] for (m, lam), rs in groups.items()]
        out += (f"\n\nNegation: each task removed alone (theta - c merge(tau_task)), control {study['control']}; strength chosen on "
                "validation (lowest removed-task accuracy keeping the control at 95% of zero-shot); means over the tasks\n\n"
                + table(["merging method", "lambda", "strength", "removed: zero-shot (%)", "removed: edited (%)", "control: zero-shot (%)",
                         "control: edited (%)"], rows))
    return out
