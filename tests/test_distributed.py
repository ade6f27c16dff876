"""Two gloo processes give the single-process results: sharded extraction and a sharded list of cells."""

from __future__ import annotations

import json
import os
import socket

import pytest
import torch
import torch.multiprocessing as mp

from platonic_sdk import distributed
from platonic_sdk.errors import PlatonicError
from platonic_sdk.evaluate import FeatureCache
from platonic_sdk.features import landmarks
from platonic_sdk.io import load_tensors, save_tensors
from tiny_encoder import TinyEncoder, tiny_task

ALPHAS = [0.0, 1.0, 3.0, 6.0, 10.0]  # five cells over two ranks: uneven on purpose


def _operator(S: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
    """A fixed operator that fits the residual-head site (d x (h + 1))."""
    return torch.randn(Z.shape[1], S.shape[1], generator=torch.Generator().manual_seed(0)) * 0.3


def _setup():
    torch.set_num_threads(1)
    encoder = TinyEncoder(head="residual_head", seed=8)
    task = tiny_task(n_train=4, n_test=33)
    return encoder, task, landmarks(encoder, task.prompts())


def _worker(rank: int, world: int, port: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    assert distributed.init("gloo") == (rank, world)
    try:
        encoder, task, g = _setup()
        everywhere = distributed.extract_sharded(encoder, task.test.items, batch_size=8)
        on_zero = distributed.extract_sharded(encoder, task.test.items, batch_size=8, dst=0)
        assert (on_zero is None) == (rank != 0)
        S, Z = everywhere
        cache = FeatureCache(S, Z, task.test.labels)
        A = _operator(S, Z)
        accuracies = distributed.map_sharded(lambda alpha: cache.accuracy(g, A, alpha), ALPHAS)
        try:
            distributed.map_sharded(lambda i: 1 // (i - 3), list(range(5)))
            failure = ""
        except PlatonicError as exc:
            failure = str(exc)
        save_tensors(os.path.join(out_dir, f"rank{rank}.safetensors"), {"S": S, "Z": Z}, "test", {})
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as fh:
            json.dump({"accuracies": accuracies, "failure": failure}, fh)
    finally:
        torch.distributed.destroy_process_group()


def test_shard_ranges_cover_in_order() -> None:
    for n, world in [(10, 3), (2, 2), (7, 1), (5, 4)]:
        ranges = [distributed.shard_range(n, r, world) for r in range(world)]
        assert [i for r in ranges for i in r] == list(range(n))
        assert max(map(len, ranges)) - min(map(len, ranges)) <= 1
    with pytest.raises(ValueError):
        distributed.shard_range(4, 2, 2)


def test_two_gloo_ranks_equal_one_process(tmp_path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_worker, args=(2, port, str(tmp_path)), nprocs=2, join=True)

    encoder, task, g = _setup()  # single process: no process group
    assert distributed.rank_and_world() == (0, 1)
    S, Z = distributed.extract_sharded(encoder, task.test.items, batch_size=8)
    single = distributed.map_sharded(lambda alpha: FeatureCache(S, Z, task.test.labels).accuracy(g, _operator(S, Z), alpha), ALPHAS)
    assert len(set(single)) > 1  # the cells differ, so order matters
    for rank in range(2):
        tensors, _, _ = load_tensors(tmp_path / f"rank{rank}.safetensors")
        torch.testing.assert_close(tensors["S"], S, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(tensors["Z"], Z, rtol=1e-6, atol=1e-6)
        result = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert result["accuracies"] == single
        assert "work item 3 failed on rank 1" in result["failure"] and "ZeroDivisionError" in result["failure"]
