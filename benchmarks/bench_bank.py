"""Whole operator bank: stacked Gram-eigh solves (OperatorBank) vs per-grid SVD solves vs a naive SVD loop.

A bank is targets x tasks x sources operators; target t has width d_t (q = d_t, projection sites),
task k has M_k classes and P_k = 30 M_k probes. Inputs are synthetic unit rows (timing only depends on
shapes); all three methods solve the same descriptors, and their operators are compared.

    python benchmarks/bench_bank.py                                  # full bank, CPU (slow: SVDs)
    python benchmarks/bench_bank.py --targets 1 --tasks EuroSAT,DTD  # a slice
    python benchmarks/bench_bank.py --device cuda --json bank.json
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import torch

from common import report, timed, unit_rows
from platonic_sdk.linalg import ridge_operator, ridge_solver

# the eight-task image benchmark: classes per task
TASKS = {"Cars": 196, "DTD": 47, "EuroSAT": 10, "GTSRB": 43, "MNIST": 10, "RESISC45": 45, "SUN397": 397, "SVHN": 10}
WIDTHS = (768, 1024, 768, 1024, 768, 1024)  # six ViT-L targets (CLIP-, SigLIP-, EVA-like widths)
METHODS = ("batched_eigh", "per_grid_svd", "naive_svd")


def run(
    device: str = "cpu",
    targets: int = 6,
    tasks: tuple[str, ...] = tuple(TASKS),
    sources: int = 6,
    probes_per_class: int = 30,
    max_seconds: float = float("inf"),
    repeats: int = 1,
) -> dict[str, Any]:
    """Time each method grid by grid (best of `repeats`). A baseline past `max_seconds` skips the
    remaining grids, and each speedup is taken over the grids both methods solved."""
    F, G = unit_rows(40, 16, 0, device), unit_rows(4, 16, 1, device)  # warm-up: solver libraries load lazily
    ridge_operator(F, G, torch.zeros(40, 4, device=device))
    ridge_solver(F, G, method="gram").many(torch.zeros(1, 40, 4, device=device))
    spent: dict[str, dict[int, float]] = {m: {} for m in METHODS}  # method -> grid index -> seconds
    worst = 0.0
    grids = [(t, k, task) for t in range(targets) for k, task in enumerate(tasks)]
    for index, (t, k, task) in enumerate(grids):
        d, M = WIDTHS[t % len(WIDTHS)], TASKS[task]
        P = probes_per_class * M
        F = unit_rows(P, d, seed=100 * t + k, device=device)
        G = unit_rows(M, d, seed=100 * t + k + 50, device=device)
        U = (0.05 * torch.randn(sources, P, M, generator=torch.Generator().manual_seed(t * 1000 + k))).to(device)

        def per_grid_svd() -> torch.Tensor:
            solve = ridge_solver(F, G)
            return torch.stack([solve(U[b]) for b in range(sources)])

        def naive_svd() -> list[torch.Tensor]:
            return [ridge_operator(F, G, U[b]) for b in range(sources)]

        runs = {"batched_eigh": lambda: ridge_solver(F, G, method="gram").many(U), "per_grid_svd": per_grid_svd, "naive_svd": naive_svd}
        results = {}
        for method, fn in runs.items():
            if method != "batched_eigh" and sum(spent[method].values()) >= max_seconds:
                continue
            spent[method][index], results[method] = timed(device, fn, repeats)
        if "per_grid_svd" in results:
            reference = results["per_grid_svd"]
            errors = (results["batched_eigh"] - reference).flatten(1).norm(dim=1) / reference.flatten(1).norm(dim=1)
            worst = max(worst, float(errors.max()))

    out: dict[str, Any] = {
        "device": device,
        "bank": f"{targets} targets x {len(tasks)} tasks x {sources} sources = {len(grids) * sources} operators",
        "tasks": ",".join(tasks),
        "max_rel_diff_batched_vs_svd": worst,
    }
    for m in METHODS:
        out[f"{m}_s"] = sum(spent[m].values())
        out[f"{m}_grids_solved"] = f"{len(spent[m])}/{len(grids)}"
    for m in METHODS[1:]:
        if spent[m]:
            batched_same = sum(spent["batched_eigh"][i] for i in spent[m])
            out[f"speedup_vs_{m}"] = sum(spent[m].values()) / batched_same
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--targets", type=int, default=6)
    parser.add_argument("--tasks", default=",".join(TASKS), help="comma-separated subset of " + ",".join(TASKS))
    parser.add_argument("--sources", type=int, default=6)
    parser.add_argument("--max-seconds", type=float, default=float("inf"), help="stop a slow method after this long")
    parser.add_argument("--repeats", type=int, default=1, help="best of this many runs per grid (noisy machines)")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: leave as is)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    tasks = tuple(args.tasks.split(","))
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        sys.exit(f"unknown task(s) {unknown}; choose from {list(TASKS)}")
    report("operator bank", run(args.device, args.targets, tasks, args.sources, max_seconds=args.max_seconds, repeats=args.repeats), args.json)


if __name__ == "__main__":
    main()
