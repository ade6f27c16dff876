"""The LoRA route's fits in worker processes: the same bits as one after another, and progress as each one ends."""

import io
import json
import multiprocessing
import os
import sys

import torch
from grid_zoo import build_workspace

from platonic_sdk import progress as progress_module
from platonic_sdk.evaluate.measure.cells import CellSettings, addition_cells, eval_names, negation_cells
from platonic_sdk.evaluate.measure.methods import lora_edit
from platonic_sdk.evaluate.run.runner import ExperimentConfig, run_experiment
from platonic_sdk.evaluate.run.workers import PassPool, cores, one_thread, pass_workers
from platonic_sdk.evaluate.plan.settings import CellSelection

RECIPE = dict(rank=2, lora_alpha=4.0, max_steps=4, batch_size=16, lr=1e-2)


def in_a_fresh_interpreter(check) -> None:
    """Run `check` in a spawned interpreter: this one may have run backward through a compiled graph (an earlier
    test), after which PyTorch refuses backward in forked children (workers.pass_workers then runs passes here)."""
    child = multiprocessing.get_context("spawn").Process(target=check)
    child.start()
    child.join()
    assert child.exitcode == 0, "the check failed in the spawned interpreter (its traceback is above)"


def test_fits_in_two_worker_processes_equal_the_serial_fits_bit_for_bit():
    in_a_fresh_interpreter(_fits_equal)


def test_workers_fork_only_while_a_forked_child_can_run_backward():
    in_a_fresh_interpreter(_forks_while_backward_survives)


def _forks_while_backward_survives() -> None:
    models = list(build_workspace().models.values())
    assert pass_workers(models, 2) == min(2, cores())
    assert pass_workers(models, 5, limit=1) == 1 and pass_workers(models, 5, limit=3) == 3 and pass_workers(models, 2, limit=8) == 2  # --workers
    compiled = torch.compile(torch.nn.Linear(3, 3), backend="aot_eager")
    compiled(torch.ones(2, 3)).sum().backward()  # starts autograd's threads: a forked child could not run backward
    assert pass_workers(models, 2) == 1


def _fits_equal() -> None:
    ws = build_workspace()
    cells = [addition_cells(ws)[0], addition_cells(ws)[-1], negation_cells(ws)[0]]
    settings = CellSettings(addition_strength=0.7, lora=RECIPE)

    def fit(cell):
        edit = lora_edit(ws, cell, settings)
        return os.getpid(), edit.factors, ws.live_accuracies(cell.target, eval_names(ws, cell), edit.scaled(0.7))

    with PassPool(fit, cells, 1) as pool:
        serial = list(pool.results())
    with PassPool(fit, cells, 2) as pool:
        parallel = list(pool.results())
    assert {pid for pid, _, _ in serial} == {os.getpid()}
    assert os.getpid() not in {pid for pid, _, _ in parallel}  # the fits ran in the workers
    for (_, a, acc_a), (_, b, acc_b) in zip(serial, parallel):
        assert a.keys() == b.keys() and all(torch.equal(a[k][i], b[k][i]) for k in a for i in (0, 1))
        assert acc_a == acc_b
    with one_thread():  # a third and a fourth run, plain, with torch's global generator moved between them: same start
        first = lora_edit(ws, cells[0], settings)
        torch.manual_seed(12345)
        again = lora_edit(ws, cells[0], settings)
    assert all(torch.equal(first.factors[k][0], again.factors[k][0]) for k in first.factors)


def test_the_runner_fits_in_workers_records_the_serial_numbers_and_reports_each_fit_off_a_terminal(tmp_path, monkeypatch):
    stream = io.StringIO()  # not a terminal: progress comes as lines
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(progress_module, "MIN_SECONDS", 0.0)
    settings = CellSettings(lora=RECIPE)
    config = ExperimentConfig(cells=(CellSelection("addition"),), methods=("zero_shot", "lora"), method_cells={"lora": 3}, settings=settings,
                              sweep_cells=1, sweep_methods=(), accumulation=False, guarantee=False, similarity=False)
    ws = build_workspace()
    run_experiment(ws, tmp_path / "run", config, progress=True)
    records = {r["key"]: r for r in map(json.loads, (tmp_path / "run" / "cells.jsonl").read_text().splitlines())}
    fitted = [r for k, r in records.items() if k.endswith("#lora")]
    assert len(fitted) == 3
    fresh = build_workspace()
    for record in fitted:
        cell = next(c for c in addition_cells(fresh) if c.key == record["key"].split("#")[0])
        with one_thread():
            edit = lora_edit(fresh, cell, settings)
        assert record["results"]["lora"] == fresh.live_accuracies(cell.target, eval_names(fresh, cell), edit.scaled(settings.addition_strength))
    lines = [line for line in stream.getvalue().splitlines() if line.startswith("lora cells")]
    assert [line.split(" (")[0] for line in lines[:-1]] == ["lora cells: 1/3", "lora cells: 2/3"]
    assert "s left" in lines[0] and lines[-1].startswith("lora cells: 3/3 in ")
