"""The budget rule's hot path, side by side: a keep set's flips at every searched strength from each item's range of
strengths where it is right (strength/budget.py `flips`) against an argmax over the classes at every strength
(`predictions`, what flips did before), on keep sets of a world's size; the counts are checked equal.

    python benchmarks/bench_keep_flips.py
"""

from __future__ import annotations

import time

import torch

from platonic_sdk.strength import ProbeGrid
from platonic_sdk.strength.budget import SEARCH, flips, predictions


def main() -> None:
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    print("items classes  interval ms  argmax ms  ratio")
    for n, M in ((300, 10), (2000, 32), (8000, 20)):
        view = ProbeGrid(torch.randn(n, 64, generator=g), torch.randn(n, 64, generator=g), torch.randn(M, 64, generator=g),
                         labels=torch.randint(0, M, (n,), generator=g))
        A = torch.randn(64, 64, generator=g) * 0.3
        t = time.perf_counter()
        down, up = (f[0] for f in flips([view], A, SEARCH))
        interval = time.perf_counter() - t
        t = time.perf_counter()
        right = predictions(view, A, SEARCH) == view.labels.reshape(1, -1)
        argmax = time.perf_counter() - t
        assert torch.equal(down, (right[:1] & ~right).sum(dim=1)) and torch.equal(up, (~right[:1] & right).sum(dim=1))
        print(f"{n:5d} {M:7d} {1000 * interval:12.1f} {1000 * argmax:10.1f} {argmax / interval:6.1f}")


if __name__ == "__main__":
    main()
