"""A run does no work twice: each item set is preprocessed once per family (accel.Prepared), each
model encodes each item set once across every stage (cells, LoRA route, studies), and a finished run
folder answers a rerun from what it holds (studies read back, no cell, no encoding)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
import torch
from grid_zoo import build_workspace

import platonic_sdk as ps
from platonic_sdk.encoding import accel, features
from platonic_sdk.encoding.feature_store import model_fingerprint
from platonic_sdk.evaluate.measure import methods
from platonic_sdk.evaluate.run import runner as experiment
from platonic_sdk.evaluate.run.runfolder import run_differences
from platonic_sdk.evaluate.run.runner import run_experiment
from platonic_sdk.evaluate.plan.settings import CACHED, CellSettings, ExperimentConfig, selections

# every stage the demo runs, small: cached methods, the LoRA route on one cell of each kind, similarity,
# sweep, accumulation and the guarantee diagnostic
CONFIG = ExperimentConfig(cells=selections(max_cells=6), methods=(*CACHED, "lora"), method_cells={"lora": 1},
                          settings=CellSettings(lora={"rank": 2, "max_steps": 2, "batch_size": 16}),
                          sweep_strengths=(0.0, 0.5), sweep_cells=2)
THREE = ("clip", "siglip", "wide")


def _workspace():
    full = build_workspace()
    return build_workspace({k: full.models[k] for k in THREE}, full.tasks)


class Counts:
    """Preprocessed items per (family, item) and encodings per (weights, item set), through wrappers."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, models: dict[str, ps.DualEncoder]) -> None:
        self.preprocessed: Counter = Counter()
        self.encoded: Counter = Counter()
        for cls in {type(m) for m in models.values()}:
            self._wrap_preprocess(monkeypatch, cls)
        encode = features._encode

        def counted(encoder: ps.DualEncoder, items: Any, *args: Any) -> Any:
            self.encoded[(model_fingerprint(encoder), tuple(id(items[i]) for i in range(len(items))))] += 1
            return encode(encoder, items, *args)
        monkeypatch.setattr(features, "_encode", counted)

    def _wrap_preprocess(self, monkeypatch: pytest.MonkeyPatch, cls: type) -> None:
        preprocess = cls.preprocess

        def counted(encoder: Any, items: Any) -> Any:
            self.preprocessed.update((encoder.family, id(item)) for item in items)
            return preprocess(encoder, items)
        monkeypatch.setattr(cls, "preprocess", counted)


def test_a_run_preprocesses_each_item_once_per_family_and_encodes_each_set_once_per_model(tmp_path, monkeypatch):
    ws = _workspace()
    counts = Counts(monkeypatch, ws.models)
    run_experiment(ws, tmp_path / "run", CONFIG)
    assert counts.encoded and counts.preprocessed
    twice = [key for key, n in counts.encoded.items() if n > 1]
    assert not twice, f"{len(twice)} (weights, item set) pairs encoded more than once"
    assert max(counts.preprocessed.values()) == 1
    # every set the cells and studies read was encoded: the test splits of each family, its grids, the fine-tunes'
    grids = {(f, t) for f in ws.families for t in ws.transfer_tasks}
    assert {(f, t) for f, t in grids if ws.grid(t).identity in ws.bank(f).grids} == grids


def test_a_finished_run_reruns_from_its_folder(tmp_path, monkeypatch):
    first = run_experiment(_workspace(), tmp_path / "run", CONFIG)
    ws = _workspace()
    counts = Counts(monkeypatch, ws.models)
    cells = []
    evaluate = methods.evaluate_cell
    monkeypatch.setattr(experiment, "evaluate_cell", lambda *a: cells.append(a) or evaluate(*a))
    monkeypatch.setattr(experiment, "similarity", lambda *a, **k: pytest.fail("the similarity study ran again"))
    monkeypatch.setattr(experiment, "draw_figures", lambda *a: pytest.fail("the figures were drawn again"))
    again = run_experiment(ws, tmp_path / "run", CONFIG)
    assert cells == [] and not counts.encoded and not counts.preprocessed
    assert again["cells"]["resumed"] == again["cells"]["passes"]
    assert {k: v for k, v in again.items() if k not in ("timings", "cells")} == {k: v for k, v in first.items() if k not in ("timings", "cells")}
    recorded = json.loads((tmp_path / "run" / "studies" / "similarity.json").read_text())["result"]
    assert json.loads((tmp_path / "run" / "studies.json").read_text())["similarity"] == recorded


def test_a_study_recorded_with_other_arguments_is_computed_again(tmp_path):
    run_experiment(_workspace(), tmp_path / "a", CONFIG)
    path = tmp_path / "a" / "studies" / "similarity.json"
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "params": {**record["params"], "union_probes": 3}, "result": {"stale": True}}))
    run_experiment(_workspace(), tmp_path / "a", CONFIG)
    assert "stale" not in json.loads(path.read_text())["result"]
    run_experiment(_workspace(), tmp_path / "b", CONFIG)
    assert run_differences(tmp_path / "a", tmp_path / "b") == []


def _batches(encoder: ps.DualEncoder, items: Any, size: int) -> list[torch.Tensor]:
    return [b if isinstance(b, torch.Tensor) else b["pixel_values"] for b in accel.batches(encoder, items, size, workers=0)]


def test_prepared_sets_give_the_batches_of_plain_items_and_preprocess_once(monkeypatch):
    ws = _workspace()
    model, items = ws.models["clip"], ws.tasks["amber_shapes"].test.items
    plain = torch.cat(_batches(model, items, 8))
    calls = []
    preprocess = type(model).preprocess
    monkeypatch.setattr(type(model), "preprocess", lambda enc, chunk: calls.append(len(chunk)) or preprocess(enc, chunk))
    prepared = accel.Prepared(model, items, chunk=8)
    assert torch.equal(torch.cat(_batches(model, prepared, 8)), plain)
    assert torch.equal(torch.cat(_batches(model, prepared, 5)), plain)  # other batch sizes slice the kept chunks
    view = prepared[3:11]
    assert len(view) == 8 and view[0] is items[3] and torch.equal(torch.cat(_batches(model, view, 8)), plain[3:11])
    assert sum(calls) == len(items)  # each item preprocessed once, whatever was asked
    assert torch.equal(features.encode_items(model, prepared, 8), features.encode_items(model, items, 8))


def test_a_prepared_set_over_the_budget_is_streamed(monkeypatch):
    ws = _workspace()
    model, items = ws.models["siglip"], ws.tasks["amber_shapes"].test.items
    monkeypatch.setattr(accel, "PREPARED_BYTES", 0)
    prepared = accel.Prepared(model, items, chunk=8)
    assert not prepared.kept()
    assert torch.equal(features.encode_items(model, prepared, 8), features.encode_items(model, items, 8))
