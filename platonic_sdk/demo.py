"""`platonic demo`: the whole method on the built-in image world and its shipped zoo, offline, in minutes.

Stages (every configuration after the encodings is a matrix product on cached features):
1. descriptor similarity: same task across models vs same model across tasks (union grid);
2. cross-family two-task addition cells at alpha: zero-shot, Random-UTD (same norm), Single-A,
   Single-B, closed form, Oracle (the target's own descriptors);
3. cross-family negation cells at strength: the removed task and the controls;
4. held-out transfer: the operators of two related tasks, evaluated on a third never probed.
Writes DIR/report.md, DIR/report.json and DIR/cells.jsonl.

Extra methods (the LoRA route, weight-space arithmetic, ...) plug in with `register_method`: each
gets (workspace, cell, settings) and returns accuracies by evaluation set, stored as
`results[name]` of the cell and summarised as addition.<name> / negation.<name>.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import attrs
import numpy as np

from .errors import PlatonicError

ADDITION_METHODS = ("zero_shot", "closed_form", "random_utd", "single_a", "single_b", "oracle")
NEGATION_METHODS = ("zero_shot", "closed_form", "random_utd", "oracle")
REPORT_NAMES = {"random_utd": "random"}  # report.json spells Random-UTD "random"

MethodFn = Callable[[Any, Any, Any], Mapping[str, float]]


@attrs.frozen
class ExtraMethod:
    """A method evaluated on (at most `max_cells` of) the demo's cells of the given kinds."""

    name: str
    fn: MethodFn
    kinds: tuple[str, ...] = ("addition", "negation")
    max_cells: int | None = None


EXTRA_METHODS: dict[str, ExtraMethod] = {}


def register_method(name: str, fn: MethodFn, kinds: Sequence[str] = ("addition", "negation"), max_cells: int | None = None) -> None:
    """Add a method to every later demo run: fn(workspace, cell, settings) -> {evaluation set: accuracy}."""
    if name in ADDITION_METHODS or name in NEGATION_METHODS:
        raise PlatonicError(f"{name!r} is a built-in method of the demo")
    EXTRA_METHODS[name] = ExtraMethod(name, fn, tuple(kinds), max_cells)


@attrs.frozen
class DemoConfig:
    """What the demo runs; `seed` sets the world's items, the probe draw and the Random-UTD draws.

    Ridge factors and the LoRA route's lr / epochs left at None take the world's own
    (`platonic_sdk.worlds.<modality>.RIDGE_A/B, LORA_LR/LORA_EPOCHS`). `lora_cells` addition and
    negation cells (evenly spread) also run the LoRA route, with the closed form's landmark ridge
    ridge_b, for at most `lora_steps` steps, deployed at the cell's alpha (or negation strength) like
    the closed form; `weight_space_cells` same-model addition cells add weight-space task arithmetic.
    """

    seed: int = 0
    modality: str = "image"
    families: tuple[str, ...] | None = None
    per_class: int = 30
    alpha: float = 0.5
    strength: float = 1.0
    ridge_a: float | None = None
    ridge_b: float | None = None
    pairing: str = "auto"
    batch_size: int = 256
    device: str | None = None
    lora_cells: int = 8
    lora_steps: int = 540
    lora_lr: float | None = None
    lora_epochs: int | None = None
    weight_space_cells: int = 6
    orthoreg_tasks: int = 0

    def resolved(self) -> "DemoConfig":
        """This config with the world's ridge factors and LoRA-route optimiser filled in."""
        import importlib

        world = importlib.import_module(f"platonic_sdk.worlds.{self.modality}")
        defaults = {"ridge_a": "RIDGE_A", "ridge_b": "RIDGE_B", "lora_lr": "LORA_LR", "lora_epochs": "LORA_EPOCHS"}
        return attrs.evolve(self, **{k: getattr(world, name) for k, name in defaults.items() if getattr(self, k) is None})


def image_setup(config: DemoConfig) -> tuple[Any, dict[str, Any]]:
    """(Workspace, description) of the image world at `config.seed` with the shipped zoo and fine-tunes."""
    from .evaluate.workspace import Workspace
    from .worlds import zoo
    from .worlds.image import ImageWorld

    world = ImageWorld(seed=config.seed)
    models = zoo.load_models(names=config.families, device=config.device)
    names = list(world.transfer_tasks)
    tasks = {n: world.task(n) for n in [*names, world.trio[2], *world.controls]}
    finetuned = zoo.load_finetunes(models, names)
    ws = Workspace(models, tasks, finetuned, world.controls, per_class=config.per_class, grid_seed=config.seed,
                   ridge_a=config.ridge_a, ridge_b=config.ridge_b, batch_size=config.batch_size)
    manifest = zoo.read_manifest()
    describe = {
        "world": f"image, seed {config.seed} ({len(names)} transfer tasks, held-out trio {' + '.join(world.trio[:2])} -> {world.trio[2]})",
        "zoo": ", ".join(f"{n} (d={manifest['members'][n]['embed_dim']}, {manifest['members'][n]['loss']})" for n in models),
        "related": list(world.trio[:2]),
        "held_out": world.trio[2],
        "finetune": manifest.get("finetune", {}),
    }
    return ws, describe


SETUPS: dict[str, Callable[[DemoConfig], tuple[Any, dict[str, Any]]]] = {"image": image_setup}


def setup_for(modality: str) -> Callable[[DemoConfig], tuple[Any, dict[str, Any]]]:
    """The setup of a modality: SETUPS, else `platonic_sdk.worlds.<modality>.demo_setup` when that world has one."""
    import importlib

    if modality in SETUPS:
        return SETUPS[modality]
    try:
        module = importlib.import_module(f"platonic_sdk.worlds.{modality}")
    except ImportError:
        module = None
    fn = getattr(module, "demo_setup", None)
    if fn is None:
        raise PlatonicError(f"no demo for modality {modality!r}; available: {', '.join(SETUPS)}")
    return fn


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else float("nan")


def summarise(records: Sequence[dict[str, Any]], kind: str, methods: Sequence[str]) -> dict[str, Any]:
    """Mean accuracy over cells of each method on each slot (task_a, task_b or removed; control)."""
    slots = ("task_a", "task_b") if kind == "addition" else ("removed",)
    out: dict[str, Any] = {"cells": len(records)}
    for method in methods:
        rows = [r for r in records if method in r["results"]]
        if not rows:
            continue
        entry = {slot: _mean([r["results"][method][r["tasks"][i]] for r in rows]) for i, slot in enumerate(slots)}
        entry["control"] = _mean([_mean([r["results"][method][c] for c in r["controls"]]) for r in rows])
        entry["cells"] = len(rows)
        out[REPORT_NAMES.get(method, method)] = entry
    return out


def checks(report: dict[str, Any]) -> dict[str, Any]:
    """The figures the issue asks for, computed from the summaries (no thresholds are tuned here)."""
    add, neg, sim, held = report["addition"], report["negation"], report["similarity"], report["held_out"]
    gain = {s: add["closed_form"][s] - add["zero_shot"][s] for s in ("task_a", "task_b")}
    oracle_gain = {s: add["oracle"][s] - add["zero_shot"][s] for s in ("task_a", "task_b")} if "oracle" in add else {}
    share = (sum(gain.values()) / sum(oracle_gain.values())) if oracle_gain and sum(oracle_gain.values()) else float("nan")
    task_mean = lambda entry: (entry["task_a"] + entry["task_b"]) / 2  # noqa: E731
    lora = report.get("lora_same_cells", {}).get("addition", {})
    lora_checks = {
        "lora_task_minus_closed_form": task_mean(lora["lora"]) - task_mean(lora["closed_form"]),
        "lora_control_minus_closed_form": lora["lora"]["control"] - lora["closed_form"]["control"],
    } if "lora" in lora else {}
    return {
        "similarity_ratio": sim["same_task_cross_model"] / sim["same_model_cross_task"] if sim["same_model_cross_task"] else float("nan"),
        "addition_gain_task_a": gain["task_a"],
        "addition_gain_task_b": gain["task_b"],
        "addition_share_of_oracle_gain": share,
        "random_below_closed_form": task_mean(add["closed_form"]) - task_mean(add["random"]),
        "addition_control_drop": add["zero_shot"]["control"] - add["closed_form"]["control"],
        "negation_removed_drop": neg["zero_shot"]["removed"] - neg["closed_form"]["removed"],
        "negation_control_drop": neg["zero_shot"]["control"] - neg["closed_form"]["control"],
        "held_out_gain": held["closed_form"] - held["zero_shot"],
        **lora_checks,
    }


def _table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    from .evaluate.report import table

    return table(header, rows)


def render_tables(report: dict[str, Any]) -> str:
    """Paper-format tables (METHOD.md sec. 9) of the summaries, as markdown."""
    labels = {"zero_shot": "zero-shot", "random": "Random-UTD", "single_a": "single A", "single_b": "single B",
              "closed_form": "ours, closed form", "oracle": "oracle (own UTD)", "lora": "ours, LoRA route",
              "weight_space": "weight space (same-model cells)"}
    add, neg = report["addition"], report["negation"]
    extra = [m for m in add if isinstance(add[m], dict) and m not in labels]
    add_rows = [[labels.get(m, m), add[m]["task_a"], add[m]["task_b"], add[m]["control"], add[m]["cells"]]
                for m in [*labels, *extra] if m in add]
    extra = [m for m in neg if isinstance(neg[m], dict) and m not in labels]
    neg_rows = [[labels.get(m, m), neg[m]["removed"], neg[m]["control"], neg[m]["cells"]] for m in [*labels, *extra] if m in neg]
    sim, held, c = report["similarity"], report["held_out"], report["checks"]
    parts = [
        "### Descriptor similarity\n\n" + _table(
            [[sim["same_task_cross_model"], sim["same_model_cross_task"], c["similarity_ratio"]]],
            ["same task, other models", "same model, other tasks (union grid)", "ratio"]),
        f"### Two-task addition, cross-family, alpha {report['config']['alpha']:g} ({add['cells']} cells)\n\n"
        + _table(add_rows, ["method", "task A", "task B", "control", "cells"]),
        f"### Negation, cross-family, strength {report['config']['strength']:g} ({neg['cells']} cells)\n\n"
        + _table(neg_rows, ["method", "removed task", "control", "cells"]),
        *lora_tables(report, labels),
        *orthoreg_tables(report),
        f"### Held-out transfer ({' + '.join(held['related'])} -> {held['task']}, {held['records']} target x source pairs)\n\n"
        + _table([["zero-shot", held["zero_shot"], held["control_zero_shot"]], ["closed form", held["closed_form"], held["control_closed_form"]]],
                 ["method", "held-out task", "control"]),
        "### Per task (cross-family single term = Single-A/B; oracle = the target's own descriptor)\n\n" + _table(
            [[t, v["zero_shot"], v["single"], v["oracle"], v["finetuned"]] for t, v in report["per_task"].items()],
            ["task", "zero-shot", "single term", "oracle", "source fine-tuned"]),
        "### Figures\n\n" + _table([[k, v] for k, v in c.items()], ["figure", "value"]),
    ]
    return "\n\n".join(parts)


def spread(items: Sequence[Any], count: int | None) -> list[Any]:
    """`count` items evenly spaced over `items` (all of them when count is None or larger)."""
    if count is None or count >= len(items):
        return list(items)
    return [items[i] for i in np.linspace(0, len(items) - 1, count).round().astype(int)] if count > 0 else []


def orthoreg_study(ws: Any, config: DemoConfig, recipe: Mapping[str, Any]) -> dict[str, Any]:
    """Plain vs OrthoReg (lambda = 1) fine-tuning of one family on several tasks, then weight-space
    addition by every registered merging method (each coefficient chosen on validation)."""
    from .evaluate.merging import addition_study
    from .finetune import FinetuneConfig, merge_methods

    family = ws.families[0]
    tasks = [ws.tasks[t] for t in ws.transfer_tasks[: config.orthoreg_tasks]]
    results = addition_study(ws.models[family], tasks, FinetuneConfig(**recipe, seed=config.seed), lambdas=(0.0, 1.0),
                             methods=merge_methods())
    return {
        "family": family,
        "tasks": [t.name for t in tasks],
        "recipe": dict(recipe),
        "runs": [{"method": r.method, "orthoreg": r.orthoreg, "coef": r.coef, "grid_top": max(r.sweep.coefs),
                  "mean_cosine": r.mean_cosine, "normalised": r.normalised,
                  "merged_mean": _mean(list(r.merged.values())), "merged": r.merged, "finetuned": r.finetuned,
                  "zero_shot": r.zero_shot} for r in results],
    }


def builtin_methods(config: DemoConfig) -> list[ExtraMethod]:
    """The LoRA route on `config.lora_cells` cells of each kind (none when 0)."""
    if not config.lora_cells:
        return []
    from .evaluate.lora_cells import LoraCellMethod
    from .transfer.lora import LoraRouteConfig

    recipe = LoraRouteConfig(lr=config.lora_lr, epochs=config.lora_epochs, max_steps=config.lora_steps, seed=config.seed,
                             ridge_b=config.ridge_b)
    method = LoraCellMethod(recipe)
    return [ExtraMethod("lora", method, (kind,), config.lora_cells) for kind in ("addition", "negation")]


def lora_tables(report: dict[str, Any], labels: Mapping[str, str]) -> list[str]:
    """The LoRA route against the closed form on the very cells where the route ran."""
    out = []
    config = report["config"]
    for kind, slots, knob in (("addition", ("task_a", "task_b", "control"), f"alpha {config['alpha']:g}"),
                              ("negation", ("removed", "control"), f"strength {config['strength']:g}")):
        same = report.get("lora_same_cells", {}).get(kind, {})
        if "lora" in same:
            rows = [[labels[m], *(same[m][s] for s in slots)] for m in ("zero_shot", "closed_form", "lora")]
            out.append(f"### LoRA route vs closed form on the same {kind} cells ({same['cells']} cells, both at {knob}, "
                       f"ridge_b {config['ridge_b']:g})\n\n" + _table(rows, ["method", *slots]))
    return out


def orthoreg_tables(report: dict[str, Any]) -> list[str]:
    """The OrthoReg study (when it ran): per merging method and lambda, task-vector cosine and the merged model's accuracy."""
    study = report.get("orthoreg")
    if not study:
        return []
    methods = list(dict.fromkeys(r["method"] for r in study["runs"]))
    runs = sorted(study["runs"], key=lambda r: methods.index(r["method"]))  # by method, then lambda
    rows = [[r["method"], r["orthoreg"], r["mean_cosine"], f"{r['coef']:.2f}" + (" (grid top)" if r["coef"] >= r["grid_top"] else ""),
             r["merged_mean"], r["normalised"]] for r in runs]
    return [f"### OrthoReg study ({study['family']}, weight-space addition of {', '.join(study['tasks'])}; "
            "coefficient chosen on validation per method, the grid grown while the pick is its top)\n\n"
            + _table(rows, ["merging method", "lambda", "mean pairwise cosine", "picked coefficient", "merged accuracy", "normalised accuracy"])]


def run_demo(
    config: DemoConfig, out: str | Path, progress: bool = True, setup: tuple[Any, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Run every stage on the zoo; write report.md / report.json / cells.jsonl into `out`; return the report.

    `setup` = (workspace, description with "related" and "held_out" task names) replaces the shipped
    zoo (tests and other worlds); by default SETUPS[config.modality] builds it.
    """
    from .progress import progress as progress_bar

    from .evaluate import studies
    from .evaluate.grid import CellSettings, addition_cells, evaluate_cell, negation_cells
    from .evaluate.similarity import similarity

    config = config.resolved()
    make = setup_for(config.modality) if setup is None else None
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    started = time.perf_counter()

    def stage(name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        value = fn()
        timings[name] = round(time.perf_counter() - t0, 2)
        return value

    ws, describe = stage("load zoo and world", lambda: setup or make(config))
    settings = CellSettings(config.alpha, config.strength)
    cells = [*addition_cells(ws, pairing=config.pairing), *negation_cells(ws)]
    if not cells:
        raise PlatonicError("the zoo gives no cross-family cells (it needs fine-tunes of at least two families)")

    methods = [*EXTRA_METHODS.values(), *builtin_methods(config)]
    extra_names = list(dict.fromkeys(m.name for m in methods))

    def run_cells() -> list[dict[str, Any]]:
        records = [evaluate_cell(ws, cell, settings) for cell in progress_bar(cells, desc="cells", disable=not progress)]
        for method in methods:
            chosen = spread([(c, r) for c, r in zip(cells, records) if c.kind in method.kinds], method.max_cells)
            for cell, record in progress_bar(chosen, desc=method.name, disable=not progress):
                record["results"][method.name] = dict(method.fn(ws, cell, settings))
        return records

    def run_same_model() -> list[dict[str, Any]]:
        chosen = spread(addition_cells(ws, groups=("same-model",)), config.weight_space_cells)
        return [evaluate_cell(ws, cell, settings) for cell in progress_bar(chosen, desc="same-model cells", disable=not progress)]

    sim = stage("similarity", lambda: similarity(ws))
    records = stage("cells", run_cells)
    same_model = stage("same-model cells", run_same_model) if config.weight_space_cells else []
    related, held_task = describe["related"], describe["held_out"]
    held = stage("held-out", lambda: [r for t in ws.families for r in studies.held_out(ws, t, related, held_task, config.alpha)])
    controls = list(ws.controls)
    report: dict[str, Any] = {
        "config": {**attrs.asdict(config), "families": list(ws.families), "tasks": list(ws.transfer_tasks), "controls": controls},
        "describe": describe,
        "similarity": {"same_task_cross_model": sim.same_task_cross_model, "same_model_cross_task": sim.same_model_cross_task,
                       "labels": [list(x) for x in sim.labels], "matrix": sim.matrix.round(4).tolist()},
        "addition": summarise([r for r in records if r["kind"] == "addition"], "addition", [*ADDITION_METHODS, *extra_names]),
        "negation": summarise([r for r in records if r["kind"] == "negation"], "negation", [*NEGATION_METHODS, *extra_names]),
        "addition_same_model": summarise(same_model, "addition", [*ADDITION_METHODS, "weight_space"]),
        "held_out": {
            "related": related, "task": held_task, "records": len(held),
            "zero_shot": _mean([r["zero_shot"][held_task] for r in held]),
            "closed_form": _mean([r["closed_form"][held_task] for r in held]),
            "control_zero_shot": _mean([_mean([r["zero_shot"][c] for c in controls]) for r in held]),
            "control_closed_form": _mean([_mean([r["closed_form"][c] for c in controls]) for r in held]),
            "per_target": {t: {"zero_shot": _mean([r["zero_shot"][held_task] for r in held if r["target"] == t]),
                               "closed_form": _mean([r["closed_form"][held_task] for r in held if r["target"] == t])}
                           for t in ws.families},
        },
        "per_task": per_task(records, ws),
    }
    if config.orthoreg_tasks:
        report["orthoreg"] = stage("orthoreg study", lambda: orthoreg_study(ws, config, describe.get("finetune", {})))
    report["lora_same_cells"] = {  # the LoRA route against the closed form on exactly the cells it ran
        kind: summarise([r for r in records if r["kind"] == kind and "lora" in r["results"]], kind, ["zero_shot", "closed_form", "lora"])
        for kind in ("addition", "negation")
    }
    if "weight_space" in report["addition_same_model"]:
        report["addition"]["weight_space"] = report["addition_same_model"]["weight_space"]
    report["checks"] = checks(report)
    timings["total"] = round(time.perf_counter() - started, 2)
    report["timings"] = timings
    with open(out / "cells.jsonl", "w") as fh:
        fh.writelines(json.dumps(r, sort_keys=True) + "\n" for r in records)
    (out / "report.json").write_text(json.dumps(report, indent=1, sort_keys=True))
    tables = render_tables(report)
    (out / "report.md").write_text(
        f"# platonic demo ({config.modality} world, seed {config.seed})\n\n"
        + _table([[k, str(v)] for k, v in {**describe, "ridge_a (relative)": config.ridge_a, "ridge_b (relative)": config.ridge_b,
                                           "LoRA route lr / epochs": f"{config.lora_lr:g} / {config.lora_epochs}",
                                           "alpha": config.alpha, "negation strength": config.strength}.items()], ["setting", "value"])
        + "\n\n" + tables + "\n\n" + _table([[k, v] for k, v in timings.items()], ["stage", "wall time (s)"]) + "\n"
    )
    return report


def per_task(records: Sequence[dict[str, Any]], ws: Any) -> dict[str, dict[str, float]]:
    """Per task: zero-shot, single-term closed form (as task A or B of addition cells), oracle, fine-tuned."""
    out = {}
    for task in ws.transfer_tasks:
        single, zero, oracle = [], [], []
        for r in records:
            if r["kind"] != "addition" or task not in r["tasks"]:
                continue
            i = r["tasks"].index(task)
            single.append(r["results"]["single_a" if i == 0 else "single_b"][task])
            zero.append(r["results"]["zero_shot"][task])
            if "oracle" in r["results"]:
                oracle.append(r["results"]["oracle"][task])
        fts = [ws.finetuned_accuracy(f, task) for f in ws.families if (f, task) in ws.finetuned]
        out[task] = {"zero_shot": _mean(zero), "single": _mean(single), "oracle": _mean(oracle),
                     "finetuned": _mean([v for v in fts if v is not None])}
    return out


def main(args: argparse.Namespace) -> int:
    """Entry point of `platonic demo` (options parsed by cli.py)."""
    config = DemoConfig(seed=args.seed, modality=getattr(args, "modality", "image"), device=getattr(args, "device", None),
                        lora_cells=args.lora_cells, weight_space_cells=args.weight_space_cells,
                        orthoreg_tasks=args.orthoreg_tasks)
    t0 = time.perf_counter()
    report = run_demo(config, args.out, progress=not getattr(args, "quiet", False))
    print(render_tables(report))
    print(f"\nreport: {Path(args.out) / 'report.md'} and report.json; wall time {time.perf_counter() - t0:.1f} s")
    return 0
