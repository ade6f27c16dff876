"""One experiment run over a workspace: cell grids, studies, figures and report.md in one folder.

Layout of `out/`: cells.jsonl (one record per finished cell; rerunning resumes), studies.json,
figures/*.png, report.md. The studies are cheap (cached features) and are recomputed on each run.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any, Callable, Sequence

import attrs
import numpy as np

from ..errors import PlatonicError
from . import plots, report, studies
from .grid import GROUPS, CellSettings, addition_cells, negation_cells, run_cells
from .runfolder import RunFolder
from .similarity import similarity
from .workspace import Workspace


def _floats(value: Sequence[float]) -> tuple[float, ...]:
    return tuple(float(v) for v in value)


@attrs.frozen
class ExperimentConfig:
    """What to run: cell kinds and groups, strengths, and which studies."""

    kinds: tuple[str, ...] = attrs.field(default=("addition", "negation"), converter=tuple)
    groups: tuple[str, ...] = attrs.field(default=("cross-family",), converter=tuple)
    pairing: str = "auto"
    alpha: float = 0.5
    strength: float = 1.0
    weight_space_coef: float = 0.5
    sweep_alphas: tuple[float, ...] = attrs.field(default=studies.DEFAULT_ALPHAS, converter=_floats)
    sweep_cells: int | None = 200  # per kind, evenly spaced over the grid (None: every cell)
    accumulation: bool = True
    held_out: tuple[str, ...] = attrs.field(default=(), converter=tuple)  # related tasks..., held-out task last
    guarantee: bool = True
    similarity: bool = True
    similarity_probes: int | None = 64  # probes per task in the union grid (None: the whole grids)
    max_cells: int | None = None  # per kind; None = all

    def __attrs_post_init__(self) -> None:
        if set(self.kinds) - {"addition", "negation"} or not self.kinds:
            raise PlatonicError(f"kinds must be addition and/or negation, got {list(self.kinds)}")
        if set(self.groups) - set(GROUPS) or not self.groups:
            raise PlatonicError(f"groups must be among {', '.join(GROUPS)}, got {list(self.groups)}")
        if self.held_out and len(self.held_out) < 2:
            raise PlatonicError("held_out lists the related tasks then the held-out task (at least two names)")
        for name in ("max_cells", "sweep_cells", "similarity_probes"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise PlatonicError(f"{name} must be positive, got {value}")

    @property
    def settings(self) -> CellSettings:
        return CellSettings(self.alpha, self.strength, self.weight_space_coef)


def spread(items: Sequence[Any], n: int | None) -> list[Any]:
    """At most n items, evenly spaced over the sequence (all when n is None or large enough)."""
    if n is None or len(items) <= n:
        return list(items)
    return [items[int(i)] for i in np.linspace(0, len(items) - 1, n).round()]


def run_experiment(
    ws: Workspace,
    out: str | os.PathLike | RunFolder,
    config: ExperimentConfig = ExperimentConfig(),
    describe: dict[str, Any] | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Run every configured cell and study on `ws`, write the run folder; returns a summary dict.

    `out` is a folder path, or a RunFolder whose lock the caller already holds.
    """
    from .. import __version__

    settings = {**ws.settings(), "run": attrs.asdict(config), "describe": describe or {}, "sdk_version": __version__}
    with contextlib.nullcontext(out) if isinstance(out, RunFolder) else RunFolder(out) as folder:
        folder.begin(settings)
        return _run(ws, folder, config, describe, on_record, progress)


def _run(ws: Workspace, folder: RunFolder, config: ExperimentConfig, describe: dict[str, Any] | None,
         on_record: Callable[[dict[str, Any]], None] | None, progress: bool) -> dict[str, Any]:
    out = folder.path
    started = time.perf_counter()
    timings: dict[str, float] = {}

    def timed(stage: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        value = fn()
        timings[stage] = timings.get(stage, 0.0) + time.perf_counter() - t0
        return value

    cells = []
    if "addition" in config.kinds:
        cells += addition_cells(ws, groups=config.groups, pairing=config.pairing)[: config.max_cells]
    if "negation" in config.kinds:
        cells += negation_cells(ws, groups=config.groups)[: config.max_cells]
    if not cells:
        raise PlatonicError(
            f"no cells to run: groups {list(config.groups)} over families {list(ws.families)} and tasks "
            f"{list(ws.transfer_tasks)} (cross-family cells need fine-tunes of at least two families)"
        )
    keys = {c.key for c in cells}
    resumed = sum(r["key"] in keys for r in folder.records())
    records = timed("cells", lambda: run_cells(ws, cells, folder.cells_path, config.settings, on_record, progress))

    results: dict[str, Any] = {}
    swept = [c for kind in config.kinds for c in spread([c for c in cells if c.kind == kind], config.sweep_cells)]
    results["sweep"] = timed("strength sweep", lambda: studies.strength_sweep(ws, swept, config.sweep_alphas))
    if config.accumulation:
        results["accumulation"] = timed("accumulation", lambda: [
            r for t in sorted({c.target for c in cells}) for r in studies.accumulation(ws, t, ws.transfer_tasks, config.alpha)
        ])
    if config.held_out:
        *related, held = config.held_out
        results["held_out"] = timed("held-out", lambda: [
            r for t in ws.families for r in studies.held_out(ws, t, related, held, config.alpha)
        ])
    if config.guarantee:
        results["guarantee"] = timed("guarantee", lambda: studies.guarantee(ws, cells, config.alpha, config.strength))
    sim = timed("similarity", lambda: similarity(ws, union_probes=config.similarity_probes)) if config.similarity else None
    if sim is not None:
        results["similarity"] = sim.as_dict()
    folder.write_json("studies.json", results)

    figures: dict[str, str] = {}

    def draw() -> None:
        if any(r["kind"] == "addition" for r in records):
            figures["scatter"] = plots.two_task_scatter(records, out / "figures/two_task_scatter.png").relative_to(out).as_posix()
        figures["sweep"] = plots.sweep_curves(
            results["sweep"], out / "figures/strength_sweep.png", {"addition": config.alpha, "negation": config.strength}
        ).relative_to(out).as_posix()
        if results.get("accumulation"):
            figures["accumulation"] = plots.accumulation_curves(results["accumulation"], out / "figures/accumulation.png").relative_to(out).as_posix()
        if sim is not None:
            figures["similarity"] = plots.similarity_heatmap(sim, out / "figures/similarity.png").relative_to(out).as_posix()

    timed("figures", draw)
    timings["total"] = time.perf_counter() - started
    settings = {
        **(describe or {}),
        "cells (resumed from an earlier run)": f"{len(records)} ({resumed})",
        "families": ", ".join(ws.families),
        "tasks": ", ".join(ws.transfer_tasks),
        "controls": ", ".join(ws.controls),
        "probes per class": ws.per_class,
        "grid seed": ws.grid_seed,
        "ridge_a (relative)": ws.ridge_a,
        "ridge_b (relative)": ws.ridge_b,
        **{k: (", ".join(map(str, v)) if isinstance(v, tuple) else v) for k, v in attrs.asdict(config).items()},
    }
    text = report.render(
        settings, records, sweep=results["sweep"], accumulation=results.get("accumulation", ()),
        held_out=results.get("held_out", ()), guarantee=results.get("guarantee", ()),
        similarity=results.get("similarity"), figures=figures, timings=timings,
    )
    folder.write_text("report.md", text)
    return {"cells": len(records), "report": str(out / "report.md"), "figures": figures, "timings": timings}
