"""Every figure a run's results allow, drawn into its folder's figures/ (plots.py), named as report.md links them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from . import plots
from .names import SLOTS


def draw_figures(out: Path, summary: Mapping[str, Any], records: Sequence[dict[str, Any]], results: Mapping[str, Any]) -> dict[str, str]:
    """Every figure the run's cell `records`, study `results` and `summary` (report.json, its config included)
    allow, as paths relative to the run folder `out`. The sweep marks the run's strength only where it was fixed."""
    settings = summary["config"]["settings"]
    space, rule = settings.get("space"), settings.get("strength_rule")
    figures = {}
    rel = lambda path: path.relative_to(out).as_posix()  # noqa: E731
    if any(r["kind"] == "addition" for r in records):
        figures["scatter"] = rel(plots.two_task_scatter(records, out / "figures/two_task_scatter.png"))
    if any(r["method"] == "closed_form" for r in results.get("sweep") or ()):
        fixed = None if rule else {kind: settings[f"{kind}_strength"] for kind in SLOTS}
        figures["sweep"] = rel(plots.sweep_curves(results["sweep"], out / "figures/strength_sweep.png", fixed, space=space, rule=rule))
    if summary.get("frontier"):
        figures["frontier"] = rel(plots.frontier_curves(summary["frontier"], out / "figures/frontier.png", space))
    if results.get("accumulation"):
        figures["accumulation"] = rel(plots.accumulation_curves(results["accumulation"], out / "figures/accumulation.png", space))
    if "similarity" in results:
        figures["similarity"] = rel(plots.similarity_heatmap(results["similarity"], out / "figures/similarity.png"))
    if summary.get("per_task"):
        figures["per_task"] = rel(plots.per_task_bars(summary["per_task"], out / "figures/per_task.png"))
    return figures
