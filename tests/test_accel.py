"""The fast extraction path computes what the plain path computes (CPU: autocast off, workers, compile)."""

from __future__ import annotations

import platform

import pytest
import torch
from tiny_encoder import TinyEncoder, tiny_task

import platonic_sdk.encoding.accel as accel
from platonic_sdk.encoding.accel import autocast, batches, compiled_media
from platonic_sdk.encoding.features import site_features


@pytest.fixture(scope="module")
def items():
    return tiny_task(n_train=8, n_test=37).test.items


def test_autocast_is_a_no_op_off_cuda() -> None:
    a = torch.randn(4, 4)
    with autocast("cpu"):
        assert (a @ a).dtype == torch.float32
    assert isinstance(autocast("cuda", enabled=False), type(autocast("cpu")))


@pytest.mark.parametrize("head", ["projection", "residual_head"])
def test_worker_preprocessing_equals_plain_path(head: str, items) -> None:
    encoder = TinyEncoder(head=head, seed=4)
    S, Z = site_features(encoder, items, batch_size=8)
    for workers in (0, 2):
        S2, Z2 = site_features(encoder, items, batch_size=8, workers=workers, amp=True)
        assert torch.equal(S, S2) and torch.equal(Z, Z2)


def test_batches_keep_order_and_sizes(items) -> None:
    encoder = TinyEncoder(seed=5)
    got = list(batches(encoder, items, batch_size=10, workers=2))
    assert [b.shape[0] for b in got] == [10, 10, 10, 7]
    assert torch.equal(torch.cat(got), encoder.preprocess(items))
    with pytest.raises(ValueError, match="batch_size"):
        next(batches(encoder, items, batch_size=0))


def test_the_free_heap_goes_back_after_each_worker_batch(items, monkeypatch) -> None:
    """With workers (batches arrive between this process's allocations), malloc_trim runs once per batch
    consumed; decoding in this process leaves the allocator alone."""
    encoder = TinyEncoder(seed=5)
    calls: list[int] = []
    monkeypatch.setattr(accel, "release_free_heap", lambda: calls.append(len(calls)))
    for workers, expected in ((0, 0), (2, 4)):
        calls.clear()
        got = list(batches(encoder, items, batch_size=10, workers=workers))
        assert len(got) == 4 and len(calls) == expected


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_malloc_trim_is_found_on_glibc() -> None:
    trim = accel._malloc_trim()
    assert trim is not None and trim(0) in (0, 1)  # 1: memory was released, 0: there was none to release
    accel.release_free_heap()


@pytest.mark.parametrize("head", ["projection", "residual_head"])
def test_compiled_media_matches_eager_and_is_undone(head: str, items) -> None:
    encoder = TinyEncoder(head=head, seed=6)
    S, Z = site_features(encoder, items, batch_size=16)
    with compiled_media(encoder, encoder.preprocess(items[:16]), backend="aot_eager") as ok:
        assert ok and "forward" in vars(encoder.media_encoder)
        S2, Z2 = site_features(encoder, items, batch_size=16)
    assert "forward" not in vars(encoder.media_encoder)
    torch.testing.assert_close(S2, S, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(Z2, Z, rtol=1e-5, atol=1e-6)


def _broken_backend(graph, example_inputs):
    raise RuntimeError("no compiler here")


def _wrong_backend(graph, example_inputs):
    """Compiles to a function that doubles every output: must be caught by the eager comparison."""
    return lambda *args: [2 * out for out in graph(*args)]


@pytest.mark.parametrize("backend", [_broken_backend, _wrong_backend])
def test_failed_compile_falls_back_to_eager(backend, items) -> None:
    encoder = TinyEncoder(seed=7)
    _, Z = site_features(encoder, items)
    with pytest.warns(UserWarning, match="running eager"):
        with compiled_media(encoder, encoder.preprocess(items[:4]), backend=backend) as ok:
            assert not ok and "forward" not in vars(encoder.media_encoder)
            assert torch.equal(site_features(encoder, items)[1], Z)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_pinned_worker_path_and_autocast(items) -> None:
    encoder = TinyEncoder(head="residual_head", seed=9).to("cuda")
    S, Z = site_features(encoder, items, batch_size=8)
    S2, Z2 = site_features(encoder, items, batch_size=8, workers=2)  # host preprocessing, pinned, async copy
    torch.testing.assert_close(S2, S, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(Z2, Z, rtol=1e-5, atol=1e-6)
    a = torch.randn(4, 4, device="cuda")
    with autocast("cuda"):
        assert (a @ a).dtype == torch.bfloat16
    _, Zb = site_features(encoder, items, batch_size=8, amp=True)
    assert float(torch.nn.functional.cosine_similarity(Zb, Z).min()) > 0.99


class _SeenOnCuda:
    """A TinyEncoder that reports a CUDA device (its forward runs on the CPU); records probe batch sizes."""

    device = torch.device("cuda")

    def __init__(self, encoder: TinyEncoder):
        self._encoder, self.probes = encoder, []

    def embed_media(self, batch):
        self.probes.append(batch.shape[0])
        return self._encoder.embed_media(batch)

    def __getattr__(self, name):
        return getattr(self._encoder, name)


@pytest.mark.parametrize(("per_item", "free", "expected"), [
    (2**20, 100 * 2**20, 32),  # half of 100 MiB holds 50 items of 1 MiB: the power of two below
    (2**20, 2**40, 1024),  # capped
    (2**30, 2**30, 8),  # not even one item fits in the share: the probe's own size
])
def test_cuda_batch_size_follows_the_probe_peak_and_free_memory(items, monkeypatch, per_item, free, expected) -> None:
    """The CUDA probe (faked on the CPU): peak memory of a forward over 8 items, per item, against half the free memory."""
    from platonic_sdk.encoding.accel import device_batch_size

    encoder = _SeenOnCuda(TinyEncoder(seed=7))
    before = 5 * 2**20
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: before)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: before + sum(encoder.probes) * per_item)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free, 2 * free))
    assert device_batch_size(encoder, items) == expected
    assert encoder.probes == [8]  # one probe forward of 8 items
    assert device_batch_size(TinyEncoder(seed=7), items) == accel.CPU_BATCH  # off CUDA: the CPU batch, no probe


def test_model_batches_join_and_give_rows_along_the_item_dimension() -> None:
    from platonic_sdk.encoding.accel import batch_nbytes, batch_rows, cat_batches
    from platonic_sdk.errors import PlatonicError

    def batch(start: int, n: int) -> dict:
        ids = torch.arange(start, start + n)
        return {"pixels": ids.float()[:, None].expand(n, 3).clone(), "extra": (ids * 10, "rgb")}

    joined = cat_batches([batch(0, 4), batch(4, 3)])
    assert torch.equal(joined["pixels"][:, 0], torch.arange(7.0)) and joined["extra"][1] == "rgb"
    picked = batch_rows(joined, torch.tensor([5, 0, 5]))
    assert torch.equal(picked["pixels"][:, 2], torch.tensor([5.0, 0.0, 5.0])) and torch.equal(picked["extra"][0], torch.tensor([50, 0, 50]))
    assert batch_nbytes(joined) == 7 * 3 * 4 + 7 * 8
    with pytest.raises(PlatonicError, match="differ in a non-tensor value"):
        cat_batches([{"x": torch.zeros(1), "mode": "a"}, {"x": torch.zeros(1), "mode": "b"}])
