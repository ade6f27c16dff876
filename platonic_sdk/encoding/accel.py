"""Fast feature extraction for any adapter: bf16 autocast, DataLoader preprocessing, optional torch.compile.

Nothing here changes what is computed: autocast is a no-op off CUDA, worker preprocessing runs the
adapter's own `preprocess`, and a compiled media tower is checked against the eager one before use.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import functools
import os
import platform
import warnings
from collections import abc
from collections.abc import Mapping
from typing import Any, Callable, ContextManager, Iterable, Iterator, Sequence

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from ..errors import PlatonicError
from ..items import Items, take
from ..protocol.encoder import DualEncoder

__all__ = [
    "PREPARED_BYTES", "Prepared", "autocast", "autocasts", "batch_nbytes", "batch_rows", "batches", "cat_batches", "compiled_media",
    "default_workers", "device_batch_size", "map_tensors", "plain", "preprocess_on_host", "release_free_heap",
]


def autocast(device: torch.device | str, enabled: bool = True) -> ContextManager:
    """bf16 autocast on CUDA; a no-op context on any other device (or when not enabled)."""
    device = torch.device(device)
    if enabled and device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def autocasts(device: torch.device | str) -> bool:
    """Whether `autocast(device)` changes the precision of a forward pass (on CUDA only)."""
    return torch.device(device).type == "cuda"


class _OnHost:
    """The encoder seen with device = cpu, so its own `preprocess` builds the batch in host memory."""

    device = torch.device("cpu")

    def __init__(self, encoder: DualEncoder):
        self._encoder = encoder

    def __getattr__(self, name: str) -> Any:
        return getattr(self._encoder, name)


class _Failed:
    """A PlatonicError met while making a batch (in a worker, or here), carried back to be raised as it was."""

    def __init__(self, error: PlatonicError):
        self.error = error


def _unbatched(batch: Any) -> Any:
    return batch


class _Batches(Dataset):
    """Batch b of `items`: references loaded, then preprocessed by the adapter; a PlatonicError comes back as `_Failed`.

    `on_host` (in a worker): the batch is built in host memory; else on the encoder's device.
    """

    def __init__(self, encoder: DualEncoder, items: Sequence[Any], batch_size: int, on_host: bool):
        self.encoder, self.items, self.batch_size, self.on_host = encoder, items, batch_size, on_host

    def __len__(self) -> int:
        return -(-len(self.items) // self.batch_size)

    def __getitem__(self, b: int) -> Any:
        try:
            chunk = [self.items[i] for i in range(b * self.batch_size, min((b + 1) * self.batch_size, len(self.items)))]
            return preprocess_on_host(self.encoder, chunk) if self.on_host else self.encoder.preprocess(chunk)
        except PlatonicError as exc:
            return _Failed(exc)


def preprocess_on_host(encoder: DualEncoder, items: Sequence[Any]) -> Any:
    """The model batch that the encoder's own `preprocess` makes of `items`, built in host memory."""
    return type(encoder).preprocess(_OnHost(encoder), items)


def map_tensors(fn: Callable[[Tensor], Tensor], batch: Any) -> Any:
    """`batch` with fn applied to every tensor in it (a tensor, or mappings / lists / tuples of them)."""
    if isinstance(batch, Tensor):
        return fn(batch)
    if isinstance(batch, Mapping):
        return type(batch)({k: map_tensors(fn, v) for k, v in batch.items()})
    if isinstance(batch, (list, tuple)):
        return type(batch)(map_tensors(fn, v) for v in batch)
    return batch


def _to_device(batch: Any, device: torch.device) -> Any:
    """Move every tensor of a (nested) batch to `device`, asynchronously from pinned memory."""
    return map_tensors(lambda t: t.to(device, non_blocking=True), batch)


def batch_rows(batch: Any, ids: Tensor) -> Any:
    """The model batch of items `ids` of `batch` (every tensor indexed along its first, item, dimension)."""
    return map_tensors(lambda t: t[ids.to(t.device)], batch)


def cat_batches(parts: Sequence[Any]) -> Any:
    """The model batch of all items of `parts` in order (tensors concatenated along the item dimension)."""
    first = parts[0]
    if isinstance(first, Tensor):
        return torch.cat(list(parts))
    if isinstance(first, Mapping):
        return type(first)({k: cat_batches([p[k] for p in parts]) for k in first})
    if isinstance(first, (list, tuple)):
        return type(first)(cat_batches(column) for column in zip(*parts))
    if any(p != first for p in parts):
        raise PlatonicError(f"cannot join model batches that differ in a non-tensor value ({first!r})")
    return first


def batch_nbytes(batch: Any) -> int:
    """Bytes held by the tensors of a model batch."""
    if isinstance(batch, Tensor):
        return batch.numel() * batch.element_size()
    values = batch.values() if isinstance(batch, Mapping) else batch if isinstance(batch, (list, tuple)) else ()
    return sum(batch_nbytes(v) for v in values)


def default_workers(items: Sequence[Any], batch_size: int) -> int:
    """Decoding workers for `items`: none for in-memory items or a single batch, else one per spare core (<= 8)."""
    if not isinstance(items, Items) or len(items) <= batch_size:
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(8, cores - 1, -(-len(items) // batch_size)))


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, or None where the C library is not glibc (macOS, musl, Windows)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


def release_free_heap() -> None:
    """Hand the heap's free pages back to the system (glibc `malloc_trim(0)`; a no-op elsewhere).

    Batches that arrive from DataLoader workers interleave this process's allocations differently on
    every batch, so glibc's heap fragments and its adaptive mmap threshold keeps freed batch-sized
    blocks mapped: peak RSS then grows with the number of batches (benchmarks/bench_data.py). Trimming
    once per batch keeps it flat at a few per cent more system time; unlike a fixed
    `MALLOC_MMAP_THRESHOLD_`, it leaves the allocator's behaviour inside a forward pass as it was.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


CPU_BATCH = 64
MAX_BATCH = 1024


@torch.inference_mode()
def device_batch_size(encoder: DualEncoder, items: Sequence[Any], memory_share: float = 0.5) -> int:
    """A batch size for the encoder's device: 64 off CUDA; on CUDA, a power of two whose forward pass
    fits in `memory_share` of the free memory, from the peak memory of a probe batch of 8 (<= 1024)."""
    device = encoder.device
    if device.type != "cuda" or not len(items):
        return CPU_BATCH
    probe = [items[i] for i in range(min(8, len(items)))]
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    encoder.last_affine().site_inputs(encoder, encoder.preprocess(probe))
    torch.cuda.synchronize(device)
    per_item = max(torch.cuda.max_memory_allocated(device) - before, 1) / len(probe)
    free, _ = torch.cuda.mem_get_info(device)
    fits = int(memory_share * free / per_item)
    return max(len(probe), min(MAX_BATCH, 1 << max(fits, 1).bit_length() - 1))


PREPARED_BYTES = 1 << 30  # an item set's model batches are kept when they fit in this much host memory


class _Chunks:
    """The kept model batches of one item set (shared by its views), and whether they are kept at all."""

    def __init__(self) -> None:
        self.batches: dict[int, Any] = {}
        self.keep: bool | None = None  # decided on the first chunk: its bytes per item times the set's size


class Prepared(abc.Sequence):
    """Items whose preprocessing is done once: chunk b (items b * chunk .. (b + 1) * chunk) is
    preprocessed by `owner` on first use and kept in host memory, so that every model preprocessing as
    `owner` does (a family's fine-tunes, its edited copies) encodes the set without preprocessing it
    again: `batches` and `site_features` take a Prepared wherever they take items.

    A set whose model batches would exceed `PREPARED_BYTES` is not kept (`kept()` is False): it is then
    decoded and preprocessed on every pass, as plain items are. Indexing gives the items themselves;
    `part(start, stop)` is a view that shares the kept batches.
    """

    def __init__(self, owner: DualEncoder, items: Sequence[Any], chunk: int = CPU_BATCH) -> None:
        if chunk < 1:
            raise ValueError(f"chunk must be positive, got {chunk}")
        self.owner, self.items, self.chunk = owner, items, int(chunk)
        self.start, self.stop = 0, len(items)
        self._chunks = _Chunks()

    def __len__(self) -> int:
        return self.stop - self.start

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):  # a contiguous slice is a view sharing the kept batches
            start, stop, step = i.indices(len(self))
            return self.part(start, stop) if step == 1 else [self[j] for j in range(start, stop, step)]
        if not -len(self) <= i < len(self):
            raise IndexError(f"item {i} of {len(self)}")
        return self.items[self.start + i % len(self)]

    def part(self, start: int, stop: int) -> "Prepared":
        """Items start..stop of this set, sharing its kept batches."""
        view = copy.copy(self)
        view.start, view.stop = self.start + max(start, 0), self.start + min(max(stop, start, 0), len(self))
        return view

    @property
    def refs(self) -> Sequence[Any]:
        """The item references of a set of `Items` (fingerprinted undecoded, as `Items` are); absent otherwise."""
        if not isinstance(self.items, Items):
            raise AttributeError(f"{type(self.items).__name__} items have no references")
        return self.source.refs

    @property
    def source(self) -> Sequence[Any]:
        """The items as a plain sequence (references stay references)."""
        return self.items if (self.start, self.stop) == (0, len(self.items)) else take(self.items, range(self.start, self.stop))

    def kept(self) -> bool:
        """Whether the set's model batches are kept (preprocesses the first chunk to decide)."""
        if self._chunks.keep is None and len(self.items):
            first = self._batch(0)
            self._chunks.keep = batch_nbytes(first) / min(self.chunk, len(self.items)) * len(self.items) <= PREPARED_BYTES
            if self._chunks.keep:
                self._chunks.batches[0] = first
        return bool(self._chunks.keep)

    def rows(self, start: int, stop: int) -> Any:
        """The host model batch of items start..stop of this view (each chunk preprocessed once)."""
        if not self.kept():
            raise PlatonicError("this item set is too large to keep preprocessed (accel.PREPARED_BYTES); stream it instead")
        start, stop, size = self.start + start, self.start + min(stop, len(self)), self.chunk
        parts = [map_tensors(lambda t, lo=max(start - b * size, 0), hi=stop - b * size: t[lo:hi], self._kept(b))
                 for b in range(start // size, -(-stop // size))]
        return parts[0] if len(parts) == 1 else cat_batches(parts)

    def _kept(self, b: int) -> Any:
        if b not in self._chunks.batches:
            self._chunks.batches[b] = self._batch(b)
        return self._chunks.batches[b]

    def _batch(self, b: int) -> Any:
        return preprocess_on_host(self.owner, [self.items[i] for i in range(b * self.chunk, min((b + 1) * self.chunk, len(self.items)))])


def plain(items: Sequence[Any]) -> Sequence[Any]:
    """The items as a plain sequence: a `Prepared` set's source (references stay references); others as they are."""
    return items.source if isinstance(items, Prepared) else items


def batches(encoder: DualEncoder, items: Sequence[Any], batch_size: int = CPU_BATCH, workers: int | None = None) -> Iterator[Any]:
    """Model batches of `items` in order, each on the encoder's device; references are decoded here.

    workers = 0: this process decodes and the adapter preprocesses (on its device, as `preprocess` does).
    workers > 0: DataLoader worker processes decode and preprocess in host memory (pinned on CUDA)
    while the model runs; batches are then copied to the device without blocking. None: see
    `default_workers` (workers only for `Items` references spanning more than one batch).
    An unreadable item raises PlatonicError naming it, in either case. With workers, the free heap
    is handed back to the system after each batch (`release_free_heap`), so memory stays flat.
    A `Prepared` set that is kept yields its kept batches (copied to the device); one that is not
    kept is streamed as its plain items are.
    """
    if batch_size < 1 or (workers or 0) < 0:
        raise ValueError(f"batch_size must be positive and workers non-negative, got {batch_size} and {workers}")
    device = encoder.device
    if isinstance(items, Prepared):
        if items.kept():
            yield from (_to_device(items.rows(i, i + batch_size), device) for i in range(0, len(items), batch_size))
            return
        items = items.source
    workers = default_workers(items, batch_size) if workers is None else workers
    made = _Batches(encoder, items, batch_size, on_host=workers > 0)
    source: Iterable[Any] = (made[b] for b in range(len(made)))
    if workers:
        source = DataLoader(made, batch_size=None, collate_fn=_unbatched, num_workers=workers, pin_memory=device.type == "cuda")
    for batch in source:
        if isinstance(batch, _Failed):
            raise batch.error
        yield _to_device(batch, device) if workers else batch
        if workers:
            release_free_heap()  # the caller is done with the batch: its freed blocks go back


@contextlib.contextmanager
def compiled_media(encoder: DualEncoder, example: Any, backend: str | Callable = "inductor", mode: str | None = None) -> Iterator[bool]:
    """Within the block, the media tower's forward is torch.compile'd (yields True), else eager (False).

    The compiled forward is run once on `example` (a model batch) and must match the eager embeddings
    to 1e-3 relative (5e-2 for low-precision weights or under autocast); on any error or mismatch it
    is dropped with a warning. Enter it inside `autocast(...)` to compile the autocast graph once.
    The eager forward is back on exit.
    """
    module = encoder.media_encoder
    with torch.inference_mode():
        reference = encoder.embed_media(example).float()
    try:
        module.forward = torch.compile(module.forward, backend=backend, mode=mode, dynamic=False)
        with torch.inference_mode():
            got = encoder.embed_media(example).float()
        low_precision = encoder.dtype != torch.float32 or torch.is_autocast_enabled(encoder.device.type)
        tolerance = 5e-2 if low_precision else 1e-3
        error = float((got - reference).norm() / reference.norm().clamp_min(1e-30))
        if error > tolerance:
            raise RuntimeError(f"compiled embeddings differ from eager ones by {error:.2e} relative")
        ok = True
    except Exception as exc:  # compilation fails in many library-specific ways; eager always works
        warnings.warn(f"torch.compile of the {encoder.family} media tower failed, running eager: {exc}", stacklevel=3)
        if "forward" in vars(module):
            del module.forward
        ok = False
    try:
        yield ok
    finally:
        if "forward" in vars(module):
            del module.forward
