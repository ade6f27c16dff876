"""Descriptor spaces and the alignment baseline, measured side by side on the worlds (docs/method.md sec. 15-16).

For every world, probe sample and seed, one experiment per descriptor space (cross-family addition and
negation cells at the world's settings, the held-out trio), each with the closed form in that space, the
oracle, the labelled reference, Random-UTD and both alignment baselines. Probes are

- `in`: in-sample for the source, its fine-tune saw them: the zoo's fine-tunes, the zoo's world seed 0,
  grid seed = the seed (the real world draws a seeded half of its train pool, so the draws differ);
- `out`: out of sample, held out of the source's fine-tune: the world's replicate `seed`
  (evaluate/replicates.py: the synthetic worlds' new world seed; the real world's garments resplit by
  the seed, and every source fine-tuned anew, the zoo's recipe, on the other half of its train pool).

Figures (means over cells, then over seeds): addition gain per transfer task and its share of the
labelled reference's, the share of the oracle's gain, the control drop per control set, negation
removal and control drop per set, held-out gain. Nothing here chooses anything: it prints the table that
the decision in docs/method.md sec. 15 is read from.

    python benchmarks/bench_spaces.py --worlds image,audio,real --seeds 1,2,3 --samples in,out --json spaces.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

REFERENCES = ("zero_shot", "oracle", "label_reference", "random_utd", "alignment", "alignment_lstsq")


def workspace(world: str, seed: int, sample: str, progress: bool) -> tuple[Any, tuple[str, ...]]:
    """`out`: the world's replicate `seed` (evaluate/replicates.py: probes held out of the sources' fine-tunes); `in`: the
    zoo's world (seed 0) and fine-tunes with grid seed `seed` (the real world: a seeded half of its train pool as probes)."""
    from platonic_sdk.evaluate.measure.replicates import REAL_PROBES_PER_CLASS, replicate_workspace
    from platonic_sdk.evaluate.measure.workspace import zoo_workspace
    from platonic_sdk.worlds.registry import world_spec

    if sample == "out":
        ws, _ = replicate_workspace(world, seed, progress=progress)
        return ws, world_spec(world).make(seed=seed).trio
    half = {"train_per_class": REAL_PROBES_PER_CLASS} if world == "real" else {}
    ws, _ = zoo_workspace(world, seed=seed if world == "real" else 0, grid_seed=seed, progress=progress, **half)
    return ws, world_spec(world).make(seed=0).trio


def measure(ws: Any, trio: tuple[str, ...], space: str, seed: int, max_cells: int | None, folder: Path) -> dict[str, Any]:
    """One experiment in `space`: (cells.jsonl records, the held-out study)."""
    from platonic_sdk.evaluate.run.runner import ExperimentConfig, run_experiment
    from platonic_sdk.evaluate.plan.settings import CellSettings, selections

    config = ExperimentConfig(
        cells=selections(max_cells=max_cells), settings=CellSettings(space=space, seed=seed),
        methods=("zero_shot", "closed_form", *REFERENCES[1:]), held_out=trio, similarity=False, accumulation=False,
        guarantee=False, sweep_strengths=(0.5,), sweep_cells=1,
    )
    report = run_experiment(ws, folder, config, {"bench": "spaces", "space": space})
    records = [json.loads(line) for line in (folder / "cells.jsonl").read_text().splitlines()]
    return {"records": records, "held_out": report.get("held_out")}


def figures(records: list[dict[str, Any]], held_out: dict[str, Any] | None, method: str) -> dict[str, Any]:
    """A method's figures over cells (accuracy points; drops are zero-shot minus the method)."""
    gains, controls = defaultdict(list), {"addition": defaultdict(list), "negation": defaultdict(list)}
    removed = []
    for r in records:
        res, zs = r["results"].get(method), r["results"]["zero_shot"]
        if res is None:
            continue
        for c in r.get("controls", ()):
            controls[r["kind"]][c].append(zs[c] - res[c])
        for t in r["tasks"]:
            if r["kind"] == "addition":
                gains[t].append(res[t] - zs[t])
            else:
                removed.append(zs[t] - res[t])
    out = {"gain": {t: float(np.mean(v)) for t, v in gains.items()}, "removal": float(np.mean(removed)) if removed else None,
           "addition_control_drop": {c: float(np.mean(v)) for c, v in controls["addition"].items()},
           "negation_control_drop": {c: float(np.mean(v)) for c, v in controls["negation"].items()}}
    if method == "closed_form" and held_out:
        out["held_out_gain"] = held_out["closed_form"] - held_out["zero_shot"]
    return out


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean over seeds of each method's figures, with shares of the labelled reference and of the oracle."""
    def mean(values: list[Any]) -> Any:
        if isinstance(values[0], dict):
            return {k: mean([v[k] for v in values]) for k in values[0]}
        return None if values[0] is None else float(np.mean(values))

    table = {m: mean([run[m] for run in runs]) for m in runs[0]}
    ref = table["label_reference"]["gain"]
    for m, row in table.items():
        row["share_of_reference"] = {t: row["gain"][t] / ref[t] if abs(ref[t]) > 1e-9 else None for t in row["gain"]}
        row["mean_gain"] = float(np.mean(list(row["gain"].values())))
    for m, row in table.items():  # each space's closed form against its own oracle and against the paper's (affinity)
        if m.endswith(" closed form"):
            row["share_of_oracle"] = row["mean_gain"] / table[m.replace(" closed form", " oracle")]["mean_gain"]
            if "affinity oracle" in table:
                row["share_of_affinity_oracle"] = row["mean_gain"] / table["affinity oracle"]["mean_gain"]
    return table


def markdown(world: str, sample: str, table: dict[str, Any]) -> str:
    rows = [f"\n### {world}, probes {sample}-sample\n",
            "| method | add gain (mean) | min share of ref (task) | share of own / affinity oracle | add control drop (max set) | neg removal "
            "| neg control drop (max set) | held-out gain |",
            "|---|---|---|---|---|---|---|---|"]
    fmt = lambda v: "-" if v is None else f"{v:+.1f}"  # noqa: E731
    for m, row in table.items():
        shares = {t: s for t, s in row["share_of_reference"].items() if s is not None}
        worst = min(shares, key=shares.get) if shares else None
        share = f"{shares[worst]:.0%} ({worst})" if worst else "-"
        oracle = " / ".join(f"{row[k]:.0%}" for k in ("share_of_oracle", "share_of_affinity_oracle") if k in row) or "-"
        add_c = max(row["addition_control_drop"].values(), default=None)
        neg_c = max(row["negation_control_drop"].values(), default=None)
        rows.append(f"| {m} | {fmt(row['mean_gain'])} | {share} | {oracle} | {fmt(add_c)} | {fmt(row['removal'])} | {fmt(neg_c)} | "
                    f"{fmt(row.get('held_out_gain'))} |")
    return "\n".join(rows)


def main() -> None:
    from platonic_sdk.encoding.feature_store import caching
    from platonic_sdk.spaces import SPACES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", default="image,audio,real")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--samples", default="in,out")
    parser.add_argument("--spaces", default=",".join(SPACES))
    parser.add_argument("--max-cells", type=int, default=60, help="cells per kind, evenly spread (0: all)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--progress", action="store_true")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    results: dict[str, Any] = {}
    with caching(), tempfile.TemporaryDirectory() as tmp:
        for world in args.worlds.split(","):
            for sample in args.samples.split(","):
                runs = []
                for seed in map(int, args.seeds.split(",")):
                    started = time.perf_counter()
                    ws, trio = workspace(world, seed, sample, args.progress)
                    run: dict[str, Any] = {}
                    for space in args.spaces.split(","):
                        got = measure(ws, trio, space, seed, args.max_cells or None, Path(tmp) / f"{world}-{sample}-{seed}-{space}")
                        run[f"{space} closed form"] = figures(got["records"], got["held_out"], "closed_form")
                        run[f"{space} oracle"] = figures(got["records"], None, "oracle")
                        if space == args.spaces.split(",")[0]:
                            run.update({m: figures(got["records"], None, m) for m in REFERENCES[2:]})
                    runs.append(run)
                    print(f"{world} {sample} seed {seed}: {time.perf_counter() - started:.0f} s", flush=True)
                results[f"{world}/{sample}"] = summarise(runs)
                print(markdown(world, sample, results[f"{world}/{sample}"]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
