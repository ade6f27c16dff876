"""Figures of a run (matplotlib, Agg backend, PNG): similarity heatmap, strength sweeps, frontiers (gain
against the worst kept set's drop, control sets and other transfer tasks alike, with the run's own point), the normalised two-task scatter, accumulation
curves and per-task bars. Each function writes one file and returns its path. A method has one colour in every
figure (style.colour); `space` is the run's descriptor space, whose colour the closed form takes.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ...atomic import atomic_path
from ..measure.frontier import BUDGETS
from .names import KEPT_DROP, chosen_words, strength_str
from .style import colour

GROUP_STYLE = {"same-model": ("tab:green", "o"), "same-architecture": ("tab:orange", "s"), "cross-family": ("tab:blue", "^")}
# Drawing order of the scatter's groups: the many cross-family cells first, the few same-model ones on top,
# larger and edged, so that no group hides under another.
GROUP_LAYER = {"cross-family": (2, 14, "none"), "same-architecture": (3, 26, "black"), "same-model": (4, 30, "black")}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _legend(ax) -> None:
    """The legend outside the axes, where it covers no data: to the right of a figure's only axes, below each
    axes of a figure with several side by side (to their right it would lie over the next panel)."""
    if len(ax.figure.axes) == 1:
        legend = ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    else:
        legend = ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), borderaxespad=0.0, ncol=2)
    legend.set_in_layout(False)  # tight_layout keeps the axes' size; the saved image grows to hold the legend


def _save(fig, path: str | os.PathLike, extra: Sequence[Any] = ()) -> Path:
    """Write the figure (its axes' legends and the `extra` artists inside the saved image), then close it."""
    fig.tight_layout()
    try:
        with atomic_path(path) as tmp:
            legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
            fig.savefig(tmp, dpi=130, format="png", bbox_inches="tight", bbox_extra_artists=[*fig.axes, *legends, *extra])
    finally:
        _pyplot().close(fig)
    return Path(path)


def similarity_heatmap(result: dict[str, Any], path: str | os.PathLike) -> Path:
    """Cosine matrix of (family, task) descriptors on the union grid (SimilarityResult.as_dict()), grouped by task."""
    plt = _pyplot()
    labels, matrix = result["labels"], np.asarray(result["matrix"])
    n = len(labels)
    size = max(5.0, 0.32 * n + 2.5)
    fig, ax = plt.subplots(figsize=(size + 1.2, size))
    image = ax.imshow(matrix, cmap="RdBu_r", vmin=-1, vmax=1)
    ticks = [f"{task} @ {family}" for family, task in labels]
    ax.set_xticks(range(n), ticks, rotation=90, fontsize=7)
    ax.set_yticks(range(n), ticks, fontsize=7)
    for i in range(1, n):  # lines between tasks
        if labels[i][1] != labels[i - 1][1]:
            ax.axhline(i - 0.5, color="black", lw=0.6)
            ax.axvline(i - 0.5, color="black", lw=0.6)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="cosine of flattened UTDs")
    ax.set_title(
        f"Descriptor similarity (union grid)\nsame task, other model: {result['same_task_cross_model']:.3f}   "
        f"same model, other task: {result['same_model_cross_task']:.3f}",
        fontsize=9,
    )
    ax.set_xlabel("descriptor (task @ source family)")
    ax.set_ylabel("descriptor (task @ source family)")
    return _save(fig, path)


def sweep_curves(records: Sequence[dict[str, Any]], path: str | os.PathLike, fixed: dict[str, float] | None = None,
                 method: str = "closed_form", space: str | None = None, rule: str | None = None) -> Path:
    """`method`'s mean task, control and other-task accuracy against the strength (studies.strength_sweep records), one
    panel per kind (addition, negation), in the method's colour (tasks solid, controls dashed, other tasks dash-dotted); a
    dotted line at the run's `fixed` strength of each kind, or, where its strength `rule` chose each cell's, a note that
    it did."""
    plt = _pyplot()
    records = [r for r in records if r["method"] == method]
    kinds = [k for k in ("addition", "negation") if any(r["kind"] == k for r in records)]
    fig, axes = plt.subplots(1, max(1, len(kinds)), figsize=(5.2 * max(1, len(kinds)), 4), squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        by_strength: dict[float, list[tuple[float, float, float]]] = defaultdict(list)
        for r in records:
            if r["kind"] == kind:
                for i, c in enumerate(r["strengths"]):
                    by_strength[c].append(tuple(np.mean([r["accuracy"][n][i] for n in names]) if names else np.nan
                                                for names in (r["tasks"], r["controls"], r.get("others", ()))))
        strengths = sorted(by_strength)
        task = [np.nanmean([v[0] for v in by_strength[c]]) for c in strengths]
        ax.plot(strengths, task, "o-", color=colour(method, space), label="edited task(s)" if kind == "addition" else "removed task")
        for at, style, label in ((1, "s--", "control sets (mean)"), (2, "d-.", "other tasks (mean)")):
            if any(not np.isnan(v[at]) for c in strengths for v in by_strength[c]):  # a study without such sets draws none
                mean_at = [np.nanmean([v[at] for v in by_strength[c]]) for c in strengths]
                ax.plot(strengths, mean_at, style, color=colour(method, space), alpha=0.6, label=label)
        if fixed and kind in fixed:
            ax.axvline(fixed[kind], color="black", lw=0.8, ls=":", label=f"the run's strength ({strength_str(fixed[kind])})")
        cells = len({r["key"] for r in records if r["kind"] == kind})
        note = f"\nthe run's strengths: {chosen_words(rule)} (its point: frontier figure)" if rule and not fixed else ""
        ax.set_title(f"{kind.capitalize()}: strength sweep ({cells} cell{'' if cells == 1 else 's'}){note}", fontsize=10 if note else 12)
        ax.set_xlabel("strength (every cell at the same fixed strength)")
        ax.set_ylabel("mean accuracy (%)")
        ax.grid(alpha=0.3)
        _legend(ax)
    return _save(fig, path)


def frontier_curves(frontiers: dict[str, dict[str, dict[str, Any]]], path: str | os.PathLike, space: str | None = None) -> Path:
    """Per kind and group (summaries.frontier_summary), one line per method: mean gain (removal) against the worst
    kept set's drop (control sets and other transfer tasks alike) over the sweep, a marker per strength, a star at the run's own point (each cell at the
    strength the run used; summaries.run_point); the budgets of 1 and 3 points dotted. A method has its colour
    (style.colour) in every panel and every report."""
    plt = _pyplot()
    keys = list(frontiers)
    fig, axes = plt.subplots(1, max(1, len(keys)), figsize=(5.2 * max(1, len(keys)), 4.4), squeeze=False)
    starred = []
    for ax, key in zip(axes[0], keys):
        for name, v in frontiers[key].items():
            style = "o-" if name.startswith("closed_form") else "s--"
            ax.plot(v["worst_drop"], v["gain"], style, ms=3.5, lw=1.4 if name.startswith("closed_form") else 1.0,
                    color=colour(name, space), label=v["label"])
            if v.get("point"):
                ax.plot(v["point"]["worst_drop"], v["point"]["gain"], "*", ms=13, color=colour(name, space), markeredgecolor="black",
                        markeredgewidth=0.6, zorder=5, label="_star")
                starred.append((v["kind"], v["point"]))
        for b in BUDGETS:
            ax.axvline(b, color="black", lw=0.7, ls=":")
        first = next(iter(frontiers[key].values()))
        what = "gain on the tasks" if first["kind"] == "addition" else "removal of the task"
        ax.set_title(f"{first['kind'].capitalize()}, {first['group']}: frontier", fontsize=9)
        ax.set_xlabel(f"{KEPT_DROP}\n(points; dotted: the budgets {' and '.join(f'{b:g}' for b in BUDGETS)})", fontsize=8)
        ax.set_ylabel(f"mean {what} (points)")
        ax.grid(alpha=0.3)
    handles = {h.get_label(): h for ax in axes[0] for h in ax.get_lines() if not h.get_label().startswith("_")}
    if starred:
        ruled = next((p for _, p in starred if p["rule"] is not None), None)
        fixed = {kind: strength_str(p["strength"]) for kind, p in starred if p["rule"] is None}
        at = chosen_words(ruled["rule"]) if ruled else "fixed: " + " / ".join(f"{c} {kind}" for kind, c in fixed.items())
        handles[f"the run's point (strengths {at})"] = plt.Line2D([], [], ls="none", marker="*", ms=11, color="white",
                                                                    markeredgecolor="black")
    fig.tight_layout()
    legend = fig.legend(list(handles.values()), list(handles), fontsize=8, loc="upper center", bbox_to_anchor=(0.5, 0.0),
                        ncol=min(3, len(handles)))
    legend.set_in_layout(False)
    return _save(fig, path, [legend])


def _normalised_pair(record: dict[str, Any], method: str) -> float | None:
    accs = record["results"].get(method)
    ft = record.get("finetuned") or {}
    if accs is None or any(not ft.get(t) for t in record["tasks"]):
        return None
    return float(np.mean([100.0 * accs[t] / ft[t] for t in record["tasks"]]))


def two_task_scatter(records: Sequence[dict[str, Any]], path: str | os.PathLike, method: str = "closed_form") -> Path:
    """Per addition cell: normalised accuracy (acc / own fine-tune, mean of the two tasks), zero-shot vs edited."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 5))
    lo, hi = 100.0, 0.0
    for group, (zorder, size, edge) in GROUP_LAYER.items():
        colour, marker = GROUP_STYLE[group]
        pts = [
            (_normalised_pair(r, "zero_shot"), _normalised_pair(r, method))
            for r in records
            if r["kind"] == "addition" and r["group"] == group
        ]
        pts = [(x, y) for x, y in pts if x is not None and y is not None]
        if not pts:
            continue
        xs, ys = np.array(pts).T
        lo, hi = min(lo, xs.min(), ys.min()), max(hi, xs.max(), ys.max())
        above = 100.0 * float(np.mean(ys > xs))
        ax.scatter(xs, ys, s=size, alpha=0.7 if edge == "none" else 0.9, color=colour, marker=marker, zorder=zorder,
                   edgecolors=edge, linewidths=0.0 if edge == "none" else 0.7,
                   label=f"{group} ({len(xs)} cell{'' if len(xs) == 1 else 's'}, {above:.0f}% above)")
    span = [lo - 3, hi + 3]
    ax.plot(span, span, color="black", lw=0.8, ls="--", label="no change", zorder=1)
    ax.set_xlim(span)
    ax.set_ylim(span)
    ax.set_xlabel("zero-shot normalised accuracy (%, mean of tasks A, B)")
    ax.set_ylabel("edited normalised accuracy (%, mean of tasks A, B)")
    ax.set_title("Two-task addition: one marker per cell")
    ax.grid(alpha=0.3)
    _legend(ax)
    return _save(fig, path)


def accumulation_curves(records: Sequence[dict[str, Any]], path: str | os.PathLike, space: str | None = None) -> Path:
    """Mean normalised accuracy over the J composed tasks (mean over targets), strength fixed vs divided by J, in the
    closed form's colour."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.6, 4))
    key = "mean_normalised" if all(r["mean_normalised"] is not None for r in records) else "mean_accuracy"
    zero_key = "zero_shot_normalised" if key == "mean_normalised" else "zero_shot_mean"
    for schedule, style in (("fixed", "o-"), ("divided", "s--")):
        rows = [r for r in records if r["schedule"] == schedule]
        Js = sorted({r["J"] for r in rows})
        ys = [np.mean([r[key] for r in rows if r["J"] == J]) for J in Js]
        strength = rows[0]["strength"] if rows else 0.0
        ax.plot(Js, ys, style, color=colour("closed_form", space),
                label=f"closed form, strength {strength_str(strength)}" + (" / J" if schedule == "divided" else ""))
    Js = sorted({r["J"] for r in records})
    ax.plot(Js, [np.mean([r[zero_key] for r in records if r["J"] == J and r["schedule"] == "fixed"]) for J in Js], ":",
            color=colour("zero_shot"), label="zero-shot")
    ax.set_xticks(Js)
    ax.set_xlabel("number of composed tasks J")
    ax.set_ylabel("mean normalised accuracy (%)" if key == "mean_normalised" else "mean accuracy (%)")
    targets = len({r["target"] for r in records})
    ax.set_title(f"Accumulation ({targets} target{'' if targets == 1 else 's'})")
    ax.grid(alpha=0.3)
    _legend(ax)
    return _save(fig, path)


def per_task_bars(per_task: dict[str, dict[str, float]], path: str | os.PathLike) -> Path:
    """Per task: zero-shot, the single-term closed form, the oracle and the sources' own fine-tunes (mean accuracy)."""
    plt = _pyplot()
    tasks = list(per_task)
    series = (("zero_shot", "zero-shot", colour("zero_shot")), ("single", "closed form, single term", colour("single_a")),
              ("oracle", "oracle (own UTD)", colour("oracle")), ("finetuned", "source fine-tuned", colour("finetuned")))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(tasks) + 2), 4.2))
    width = 0.8 / len(series)
    for i, (key, label, shade) in enumerate(series):
        ax.bar(np.arange(len(tasks)) + (i - 1.5) * width, [per_task[t][key] for t in tasks], width, label=label, color=shade)
    ax.set_xticks(range(len(tasks)), tasks, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("mean accuracy (%)")
    ax.set_title("Per task (cross-family addition cells)")
    ax.grid(alpha=0.3, axis="y")
    _legend(ax)
    return _save(fig, path)
