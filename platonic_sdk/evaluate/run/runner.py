"""The one experiment runner: a spec (which cells, methods, settings and studies), a workspace
(models, tasks, controls, fine-tunes), one guarded run folder, one report. `platonic grid` and
`platonic demo` (a named preset per world, demo.py) both run it.

Layout of `out/`: run.json (every setting; a resume must repeat them), cells.jsonl (one record per
finished cell and method pass; a rerun resumes), studies/<name>.json (each study's result with its
arguments, and the fine-tunes' test accuracies: a rerun reads them back), studies.json (every study),
report.json (the summaries), report.md (tables and figures) and figures/*.png (a rerun that reports
the same summary keeps them). Methods with a cell cap (the LoRA route)
run on cells spread evenly over each kind and group, in worker processes, one per core (workers.py),
while this process runs the other methods; their records come after the others'.

Threads: the encodings (the similarity study's, then every cell's features, made before any worker starts) run
with torch's thread count as the caller left it; the cells and the studies after them run one thread, since they
are thousands of small products that more threads only slow down.

Under torch.distributed (`torchrun`, every rank calling run_experiment with the same spec) the
encodings and the cells are split over the ranks (ranks.py) and rank 0 alone writes `out/`; the
numbers are those of a single process.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from typing import Any, Callable, Sequence

import numpy as np
import torch

from ...encoding import distributed
from ...errors import PlatonicError
from ...finetune import FinetuneConfig
from ...progress import progress as progress_bar
from ...transfer.lora import LoraRouteConfig
from ...version import __version__
from ..measure import studies
from ..measure.cells import Cell, addition_cells, negation_cells
from ..measure.merging import orthoreg_comparison
from ..measure.methods import evaluate_cell, lora_inputs, method
from ..measure.similarity import similarity
from ..measure.workspace import Workspace
from ..report import render as report
from ..report.figures import draw_figures
from ..plan.settings import KINDS, CellSelection, CellSettings, ExperimentConfig
from .ranks import run_cells, same_settings, warm
from .runfolder import REPORT_FILE, RunFolder
from .workers import PassPool, one_thread, pass_workers, threads

Pass = tuple[str, Cell, tuple[str, ...]]  # (record key, cell, methods): one record of the run

def spread(items: Sequence[Any], count: int | None) -> list[Any]:
    """At most `count` items, evenly spaced over the sequence (all when count is None or large enough)."""
    if count is None or len(items) <= count:
        return list(items)
    return [items[int(i)] for i in np.linspace(0, len(items) - 1, count).round()] if count > 0 else []


def selected_cells(ws: Workspace, selection: CellSelection, pairing: str) -> list[Cell]:
    """The cells of one selection (kind and group), at most its `max_cells`, evenly spread."""
    if selection.kind == "addition":
        cells = addition_cells(ws, groups=(selection.group,), pairing=pairing)
    else:
        cells = negation_cells(ws, groups=(selection.group,))
    return spread(cells, selection.max_cells)


def method_passes(ws: Workspace, config: ExperimentConfig) -> list[tuple[str, Cell, tuple[str, ...]]]:
    """(record key, cell, methods) of every record: uncapped methods on each cell, then each capped one."""
    first, later = [], []
    for selection in config.cells:
        cells = selected_cells(ws, selection, config.pairing)
        names = selection.methods or config.methods
        first += [(c.key, c, tuple(m for m in names if config.cap(m) is None)) for c in cells]
        for m in (m for m in names if config.cap(m) is not None and selection.kind in method(m).kinds):
            later += [(f"{c.key}#{m}", c, (m,)) for c in spread(cells, config.cap(m))]
    return first + later


def run_experiment(
    ws: Workspace,
    out: str | os.PathLike | RunFolder,
    config: ExperimentConfig = ExperimentConfig(),
    describe: dict[str, Any] | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    progress: bool = False,
    title: str = "platonic grid",
    workers: int | None = None,
) -> dict[str, Any]:
    """Run every selected cell, method and study on `ws` into the run folder; returns report.json's content.
    `workers`: at most this many worker processes for the capped methods' passes (None: one per core; 1: here).

    `out` is a folder path, or a RunFolder whose lock the caller already holds. In a process group every
    rank must call this with the same workspace and spec (refused otherwise); rank 0 writes `out` and
    returns the content, the other ranks touch no file and return None.
    """
    describe = dict(describe or {})
    settings = {**ws.settings(), "run": config.as_dict(), "describe": describe, "sdk_version": __version__}
    same_settings(settings)
    with contextlib.ExitStack() as stack:
        folder: RunFolder | None = None

        def begin() -> list[str]:  # rank 0: lock, check or record the settings; the finished cells' keys
            nonlocal folder
            folder = out if isinstance(out, RunFolder) else stack.enter_context(RunFolder(out))
            folder.begin(settings)
            return [r["key"] for r in folder.records()]

        finished = distributed.on_rank0(begin)
        encoding = torch.get_num_threads()
        with one_thread():
            return _run(ws, folder, config, describe, on_record, progress, title, set(finished), encoding, workers)


def _run(ws: Workspace, folder: RunFolder | None, config: ExperimentConfig, describe: dict[str, Any],
         on_record: Callable[[dict[str, Any]], None] | None, progress: bool, title: str, finished: set[str],
         encoding: int, workers: int | None) -> dict[str, Any] | None:
    started = time.perf_counter()
    timings: dict[str, float] = {}

    def timed(stage: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        value = fn()
        timings[stage] = round(timings.get(stage, 0.0) + time.perf_counter() - t0, 2)
        return value

    passes = method_passes(ws, config)
    if not passes:
        raise PlatonicError(
            f"no cells to run: {[(s.kind, s.group) for s in config.cells]} over families {list(ws.families)} and tasks "
            f"{list(ws.transfer_tasks)} (cross-family cells need fine-tunes of at least two families)"
        )
    results: dict[str, Any] = {}
    with distributed.sharding():  # every rank in step: each encoding is split over the ranks
        with threads(encoding):
            if config.similarity:  # first: it encodes what the cells reuse
                results["similarity"] = timed("similarity", lambda: recorded_similarity(ws, folder, config.similarity_probes, progress))
            if distributed.rank_and_world()[1] > 1:
                timed("features", lambda: warm(ws, list(dict.fromkeys(c for key, c, _ in passes if key not in finished)), config.settings))
    done = {r["key"]: r for r in folder.records()} if folder is not None else {}
    resumed = sum(key in finished for key, _, _ in passes)

    def evaluate(p: tuple[str, Cell, tuple[str, ...]]) -> dict[str, Any]:
        return {**evaluate_cell(ws, p[1], config.settings, p[2]), "key": p[0]}

    def record(entry: dict[str, Any]) -> None:  # rank 0
        entry = folder.append(entry)
        done[entry["key"]] = entry
        if on_record is not None:
            on_record(entry)

    pending = [p for p in passes if p[0] not in finished]
    if distributed.rank_and_world()[1] > 1:  # the ranks split every pass among themselves
        timed("cells", lambda: run_cells(pending, evaluate, record, progress))
    else:
        capped = [p for p in pending if any(config.cap(m) is not None for m in p[2])]
        run_capped(ws, capped, [p for p in pending if p not in capped], evaluate, record, config.settings, progress, timed, encoding,
                   workers)
    if folder is None:  # another rank: its cells went to rank 0, which runs the rest
        return None
    records: dict[str, dict[str, Any]] = {}
    for key, cell, _ in passes:  # one record per cell, with every method's results
        records.setdefault(cell.key, {**done[key], "key": cell.key, "results": {}})["results"].update(done[key]["results"])
    cells = list(dict.fromkeys(c for _, c, _ in passes))
    cs = config.settings
    addition, negation, centre, anchor, space = cs.addition_strength, cs.negation_strength, cs.centre, cs.anchor, cs.space
    add_centred, add_anchored = cs.centres("addition"), cs.anchors("addition")
    sweep_on = lambda pool: [c for kind in KINDS for c in spread([c for c in pool if c.kind == kind], config.sweep_cells)]  # noqa: E731
    swept = {m: sweep_on(cells if config.cap(m) is None else [c for _, c, names in passes if m in names]) for m in config.swept()}
    targets = sorted({c.target for c in cells})

    def study(name: str, stage: str, params: dict[str, Any], compute: Callable[[], Any]) -> Any:
        return timed(stage, lambda: recorded(folder, name, {**params, "cells": [c.key for c in cells]}, compute))

    results["sweep"] = study("sweep", "strength sweep", {"swept": {m: [c.key for c in on] for m, on in swept.items()}}, lambda: [
        r for m, on in swept.items() for r in studies.strength_sweep(ws, on, config.sweep_strengths, cs, [m])])
    if config.accumulation:
        results["accumulation"] = study("accumulation", "accumulation", {"targets": targets}, lambda: [
            r for t in targets
            for r in studies.accumulation(ws, t, ws.transfer_tasks, addition, centre=add_centred, anchors=add_anchored, space=space)])
    if config.held_out:
        *related, held = config.held_out
        results["held_out"] = study("held_out", "held-out", {}, lambda: [
            r for t in ws.families for r in studies.held_out(ws, t, related, held, addition, add_centred, add_anchored, space)])
    if config.guarantee:
        results["guarantee"] = study("guarantee", "guarantee", {}, lambda: studies.guarantee(ws, cells, addition, negation, centre, anchor, space))
    if config.orthoreg_tasks:
        results["orthoreg"] = study("orthoreg", "orthoreg study", {}, lambda: orthoreg_study(ws, config, progress))
    ws.adopt_finetuned_accuracies(recorded(folder, "finetuned", {"cells": [c.key for c in cells]}, lambda: finetuned_accuracies(ws)))
    folder.write_json("studies.json", results)

    summary = report.summarise_run(ws, list(records.values()), results, config)
    summary["config"] = {**folder_settings(ws, config), "describe": describe}
    summary["figures"] = timed("figures", lambda: drawn_figures(folder, summary) or draw_figures(folder.path, summary, list(records.values()), results))
    timings["total"] = round(time.perf_counter() - started, 2)
    summary["timings"] = timings
    summary["cells"] = {"records": len(records), "resumed": resumed, "passes": len(passes)}
    folder.write_json(REPORT_FILE, summary)
    folder.write_text("report.md", report.render(summary, title, results))
    return json.loads(json.dumps(summary, sort_keys=True))  # as report.json reads back: a finished run's rerun gives the same value


def run_capped(ws: Workspace, capped: list[Pass], first: list[Pass], evaluate: Callable[[Pass], dict[str, Any]],
               record: Callable[[dict[str, Any]], None], settings: CellSettings, progress: bool,
               timed: Callable[[str, Callable[[], Any]], Any], encoding: int, limit: int | None = None) -> None:
    """One process: first every cell's encodings (stage "features", with `encoding` threads: nothing else runs
    yet), then worker processes, one per core and at most `limit` (workers.PassPool), run the capped methods' passes (the LoRA
    route's fits; stage "<methods> cells", reported as each one ends) while this process runs the other cells
    in order (stage "cells"): each stage then holds work of one cost, and its time left is estimated from its
    own rate. Every record in pass order, the capped ones last. The workers inherit what they read (their
    cells' encodings, each LoRA fit's descriptors and grid states): it is made before they start, once."""
    workers = pass_workers([ws.models[c.target] for _, c, _ in capped], len(capped), limit)
    cells = list(dict.fromkeys(c for _, c, _ in [*capped, *first]))

    def prepare() -> None:
        for cell in progress_bar(cells, desc="features", disable=not progress):
            warm(ws, [cell], settings)
        for _, cell, names in capped:
            if "lora" in names:
                lora_inputs(ws, cell, settings)

    with threads(encoding):
        timed("features", prepare)
    stage = " + ".join(sorted({m for _, _, names in capped for m in names})) + " cells"
    with progress_bar(total=len(capped), desc=stage, disable=not (progress and capped)) as bar, \
            PassPool(evaluate, capped, workers, on_done=bar.update) as pool:
        timed("cells", lambda: run_cells(first, evaluate, record, progress))
        if capped:
            timed(stage, lambda: [record(entry) for entry in pool.results()])


def recorded(folder: RunFolder, name: str, params: dict[str, Any], compute: Callable[[], Any]) -> Any:
    """Study `name`'s result as the run folder recorded it with these `params` (the folder's settings pin the
    rest), else compute()'s, recorded there now: a resumed run reads back what a finished study computed."""
    found = folder.study(name, params)
    return found if found is not None else folder.record_study(name, params, compute())


def recorded_similarity(ws: Workspace, folder: RunFolder | None, probes: int | None, progress: bool) -> dict[str, Any]:
    """The similarity study on every rank together (its encodings are split over them), or its result as
    rank 0's run folder recorded it with the same families, tasks and probes."""
    params = {"families": list(ws.families), "tasks": list(ws.transfer_tasks), "union_probes": probes}
    found = distributed.on_rank0(lambda: folder.study("similarity", params))
    if found is not None:
        return found
    result = similarity(ws, union_probes=probes, progress=progress).as_dict()
    return distributed.on_rank0(lambda: folder.record_study("similarity", params, result))


def drawn_figures(folder: RunFolder, summary: dict[str, Any]) -> dict[str, str] | None:
    """The figures of the folder's report.json when it reports this same summary (a finished run, rerun)
    and every figure file is there; None otherwise (they are drawn)."""
    path = folder.path / REPORT_FILE
    if not path.is_file():
        return None
    previous = json.loads(path.read_text())
    figures = previous.pop("figures", {})
    comparable = lambda s: json.dumps({k: v for k, v in s.items() if k not in ("timings", "cells")}, sort_keys=True)  # noqa: E731
    if comparable(previous) != comparable(summary) or not all((folder.path / f).is_file() for f in figures.values()):
        return None
    return figures


def finetuned_accuracies(ws: Workspace) -> list[list[Any]]:
    """[family, task, test accuracy] of every fine-tuned model of a transfer task (the report's normalisers)."""
    return [[f, t, ws.finetuned_accuracy(f, t)] for f, t in ws.finetuned if t in ws.transfer_tasks]


def folder_settings(ws: Workspace, config: ExperimentConfig) -> dict[str, Any]:
    """What the report says the run used: the workspace's settings (without fingerprints) and the spec,
    with the LoRA route's whole recipe when it ran."""
    used = {**{k: v for k, v in ws.settings().items() if k != "fingerprints"}, **config.as_dict()}
    if "lora" in {m for s in config.cells for m in s.methods or config.methods}:
        used["settings"]["lora"] = LoraRouteConfig(**config.settings.lora, seed=config.settings.seed).describe()
    return used


def orthoreg_study(ws: Workspace, config: ExperimentConfig, progress: bool = False) -> dict[str, Any]:
    """Plain vs OrthoReg (lambda = 1) fine-tuning of the first family on several tasks, then weight-space
    addition and negation (against the first control with train items) by every registered merging
    method, each strength chosen on validation."""
    family = ws.families[0]
    tasks = [ws.tasks[t] for t in ws.transfer_tasks[: config.orthoreg_tasks]]
    recipe = FinetuneConfig(**config.orthoreg_recipe, seed=config.settings.seed)
    control = next((ws.tasks[c] for c in ws.controls if len(ws.tasks[c].train)), None)
    return orthoreg_comparison(family, ws.models[family], tasks, recipe, progress, control)
