"""Markdown report of a run: configuration, the paper's tables (METHOD.md sec. 9) and the figures.

Every number is a mean over cells of percent accuracies; the tables keep the paper's layout
(rows: methods; columns: task A, task B, then each control set).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Sequence

import numpy as np

METHOD_LABELS = {
    "zero_shot": "zero-shot",
    "random_utd": "Random-UTD",
    "single_a": "single A",
    "single_b": "single B",
    "closed_form": "ours, closed form",
    "oracle": "oracle (own UTD)",
    "weight_space": "weight-space task arithmetic",
}
GROUP_ORDER = ("cross-family", "same-architecture", "same-model")

PAPER_ADDITION = """| method | task A | task B | CIFAR-100 | ImageNet |
|---|---|---|---|---|
| zero-shot | 60.98 | 60.98 | 75.82 | 72.33 |
| Random-UTD | 32.37 | 32.58 | 32.97 | 23.37 |
| single A | 80.56 | 59.86 | 75.04 | 71.01 |
| ours, closed form | 79.08 | 72.60 | 74.01 | 69.09 |
| oracle (own UTD) | 83.64 | 76.74 | 75.05 | 71.35 |"""


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table; floats print with two decimals, None as a dash."""
    fmt = lambda v: "-" if v is None or (isinstance(v, float) and np.isnan(v)) else (f"{v:.2f}" if isinstance(v, float) else str(v))  # noqa: E731
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None


def cell_table(records: Sequence[dict[str, Any]], kind: str) -> str:
    """Paper layout for one kind and group: methods x (task A[, task B], controls), plus cell counts."""
    controls = sorted({c for r in records for c in r["controls"]})
    slots = ["task A", "task B"] if kind == "addition" else ["removed task"]
    values: dict[str, list[list[float]]] = defaultdict(list)
    for r in records:
        for method, accs in r["results"].items():
            values[method].append([accs[t] for t in r["tasks"]] + [accs.get(c, float("nan")) for c in controls])
    rows = []
    for method, label in METHOD_LABELS.items():
        if method in values:
            arr = np.asarray(values[method], dtype=float)
            rows.append([label, *[float(v) for v in np.nanmean(arr, axis=0)], len(arr)])
    return table(["method", *slots, *controls, "cells"], rows)


def gain_summary(records: Sequence[dict[str, Any]]) -> str:
    """Mean change of the edited tasks over zero-shot, and the share of the oracle's change recovered."""
    gains, oracle = [], []
    for r in records:
        zs = np.mean([r["results"]["zero_shot"][t] for t in r["tasks"]])
        gains.append(np.mean([r["results"]["closed_form"][t] for t in r["tasks"]]) - zs)
        if "oracle" in r["results"]:
            oracle.append(np.mean([r["results"]["oracle"][t] for t in r["tasks"]]) - zs)
    text = f"mean change of the edited task(s) over zero-shot: {np.mean(gains):+.2f} points"
    if oracle and abs(np.mean(oracle)) > 1e-9:
        text += f"; oracle {np.mean(oracle):+.2f} points (closed form reaches {100 * np.mean(gains) / np.mean(oracle):.0f}% of it)"
    return text + "."


def cells_section(records: Sequence[dict[str, Any]], kind: str, strength: float) -> str:
    title = "Two-task addition" if kind == "addition" else "Negation"
    parts = [f"## {title} (strength {strength:g})"]
    for group in GROUP_ORDER:
        rows = [r for r in records if r["kind"] == kind and r["group"] == group]
        if rows:
            parts += [f"### {group} ({len(rows)} cells)", cell_table(rows, kind), gain_summary(rows)]
    return "\n\n".join(parts)


def sweep_section(records: Sequence[dict[str, Any]]) -> str:
    by = defaultdict(list)
    for r in records:
        by[(r["alpha"], r["kind"])].append((r["task_mean"], r["control_mean"]))
    alphas = sorted({a for a, _ in by})
    rows = []
    for a in alphas:
        row: list[Any] = [f"{a:g}"]
        for kind in ("addition", "negation"):
            vals = by.get((a, kind), [])
            row += [_mean([v[0] for v in vals]), _mean([v[1] for v in vals])]
        rows.append(row)
    header = ["alpha", "addition: tasks", "addition: controls", "negation: removed task", "negation: controls"]
    return "## Strength sweep (closed form)\n\n" + table(header, rows)


def accumulation_section(records: Sequence[dict[str, Any]]) -> str:
    rows = []
    for J in sorted({r["J"] for r in records}):
        row: list[Any] = [J]
        for schedule in ("fixed", "divided"):
            sel = [r for r in records if r["J"] == J and r["schedule"] == schedule]
            norm = [r["mean_normalised"] for r in sel if r["mean_normalised"] is not None]
            row += [_mean([r["mean_accuracy"] for r in sel]), _mean(norm), _mean([r["control_mean"] for r in sel])]
        zero = [r["zero_shot_normalised"] for r in records if r["J"] == J and r["schedule"] == "fixed" and r["zero_shot_normalised"] is not None]
        rows.append(row + [_mean(zero)])
    header = ["J", "alpha: acc", "alpha: normalised", "alpha: controls", "alpha/J: acc", "alpha/J: normalised", "alpha/J: controls", "zero-shot normalised"]
    targets = sorted({r["target"] for r in records})
    return f"## Accumulation (targets: {', '.join(targets)})\n\n" + table(header, rows)


def held_out_section(records: Sequence[dict[str, Any]]) -> str:
    if not records:
        return ""
    held = records[0]["held_out"]
    names = list(records[0]["zero_shot"])
    rows = []
    for target in sorted({r["target"] for r in records}):
        sel = [r for r in records if r["target"] == target]
        rows.append([target, len(sel)] + [v for n in names for v in (_mean([r["zero_shot"][n] for r in sel]), _mean([r["closed_form"][n] for r in sel]))])
    header = ["target", "source pairs"] + [f"{n}: {m}" for n in names for m in ("zero-shot", "closed form")]
    related = " + ".join(records[0]["related"])
    return f"## Held-out transfer ({related} -> {held}, never fitted)\n\n" + table(header, rows)


def guarantee_section(records: Sequence[dict[str, Any]]) -> str:
    rows = []
    keys = ("guaranteed", "changed", "bound", "lost", "observed_loss")
    for kind in ("addition", "negation"):
        for group in GROUP_ORDER:
            sel = [r["pooled"] for r in records if r["kind"] == kind and r["group"] == group]
            if sel:
                rows.append([kind, group, len(sel)] + [_mean([s[k] for s in sel]) for k in keys] + [sum(s["violations"] for s in sel)])
    holds = all(r["pooled"]["lost"] <= r["pooled"]["bound"] + 1e-9 and r["pooled"]["violations"] == 0 for r in records)
    header = ["kind", "group", "cells", "guaranteed %", "changed %", "bound (points)", "lost (points)", "net loss (points)", "violations"]
    verdict = "holds on every record" if holds else "VIOLATED on some record"
    return (
        "## Guarantee diagnostic (closed form)\n\n"
        "An item is guaranteed when its top-1 margin exceeds 2 ||f' - f|| (unit landmarks move no logit by more).\n"
        "bound = correct items without the guarantee; lost = correct items that became wrong; net loss = accuracy before - after.\n\n"
        + table(header, rows)
        + f"\n\nThe bound {verdict} ({len(records)} records)."
    )


def similarity_section(sim: dict[str, Any] | None, figure: str | None) -> str:
    if sim is None:
        return ""
    text = (
        "## Descriptor similarity\n\n"
        + table(
            ["same task, other models (own grid)", "same model, other tasks (union grid)", "ratio"],
            [[sim["same_task_cross_model"], sim["same_model_cross_task"], sim["ratio"]]],
        )
    )
    return text + (f"\n\n![similarity]({figure})" if figure else "")


def render(
    config: dict[str, Any],
    cells: Sequence[dict[str, Any]],
    *,
    sweep: Sequence[dict[str, Any]] = (),
    accumulation: Sequence[dict[str, Any]] = (),
    held_out: Sequence[dict[str, Any]] = (),
    guarantee: Sequence[dict[str, Any]] = (),
    similarity: dict[str, Any] | None = None,
    figures: dict[str, str] | None = None,
    timings: dict[str, float] | None = None,
) -> str:
    """The whole report.md of a run."""
    figures = figures or {}
    fig = lambda name: f"\n\n![{name}]({figures[name]})" if name in figures else ""  # noqa: E731
    parts = ["# platonic grid report", "## Configuration", table(["setting", "value"], [[k, str(v)] for k, v in config.items()])]
    if timings:
        parts.append(table(["stage", "wall time (s)"], [[k, round(v, 2)] for k, v in timings.items()]))
    settings = cells[0]["settings"] if cells else {"alpha": config.get("alpha", 0.5), "strength": config.get("strength", 1.0)}
    if any(r["kind"] == "addition" for r in cells):
        parts.append(cells_section(cells, "addition", settings["alpha"]) + fig("scatter"))
    if any(r["kind"] == "negation" for r in cells):
        parts.append(cells_section(cells, "negation", settings["strength"]))
    if sweep:
        parts.append(sweep_section(sweep) + fig("sweep"))
    if accumulation:
        parts.append(accumulation_section(accumulation) + fig("accumulation"))
    if held_out:
        parts.append(held_out_section(held_out))
    if guarantee:
        parts.append(guarantee_section(guarantee))
    if similarity is not None:
        parts.append(similarity_section(similarity, figures.get("similarity")))
    parts.append("## Paper reference (ViT-L scale, real data, 3,360 cross-family cells; METHOD.md sec. 9)\n\n" + PAPER_ADDITION)
    return "\n\n".join(p for p in parts if p) + "\n"
