"""Cell passes in worker processes, one per core: how the runner spreads the LoRA route's fits.

`PassPool(fn, work, workers)` runs fn on every work item and gives the results back in work order. With
`workers` > 1 it forks that many processes when entered: each inherits the parent's memory as it is at
that moment (the workspace with every encoding made so far, copy-on-write, nothing pickled) and runs
torch with one intra-op thread, so the processes use at most one thread per core. The passes start at
once, while the parent goes on with other work; `results()` collects them. With `workers` = 1 the
passes run in this process when `results()` asks for them, also with one thread each: a pass gives the
same bits however many workers run it (floating-point sums over other thread counts differ in the last
bits, so the thread count is fixed, not the core count's).

Forked, not spawned: a spawned or forkserver worker would receive every model and item set pickled and
would import the caller's `__main__` module again (a script without a main guard would run twice).
`pass_workers` forks only where that is safe: Linux, every model on the CPU, CUDA not initialised, no
torch.distributed process group (ranks split the cells among themselves instead).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable, Iterable, Iterator, Sequence

import torch

from ...encoding import distributed
from ...progress import silence
from ...protocol.encoder import DualEncoder

_FN: Callable[[Any], Any] | None = None  # the pool's function and work, read by the forked workers
_WORK: Sequence[Any] = ()


def cores() -> int:
    """The CPU cores this process may run on (its affinity mask)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def pass_workers(models: Iterable[DualEncoder], passes: int, limit: int | None = None) -> int:
    """Worker processes for `passes` passes on `models`: min(passes, limit) (limit None: cores()) where forking is
    safe (Linux, every model on the CPU, CUDA not initialised, no process group, and a forked child can still run
    backward), else 1 (they run here)."""
    workers = max(1, min(passes, cores() if limit is None else limit))
    safe = (workers > 1 and sys.platform == "linux" and distributed.rank_and_world()[1] == 1 and not torch.cuda.is_initialized()
            and all(m.device.type == "cpu" for m in models) and _backward_survives_fork())
    return workers if safe else 1


def _backward_survives_fork() -> bool:
    """Whether a child forked now can run backward. Once this process has run backward (a fine-tune in the same
    session, say), PyTorch's autograd engine has started threads that a fork does not copy, and it refuses
    backward in the children ("Autograd-and-Fork"): one forked probe finds out."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as probe:
        return probe.submit(_backward_runs).result()


def _backward_runs() -> bool:
    x = torch.ones(1, requires_grad=True)
    try:
        (2 * x).sum().backward()
    except RuntimeError:
        return False
    return True


@contextlib.contextmanager
def threads(count: int) -> Iterator[None]:
    """torch runs `count` intra-op threads inside the block; the count is restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def one_thread() -> contextlib.AbstractContextManager[None]:
    """torch runs one intra-op thread inside the block, as every pooled pass does."""
    return threads(1)


def _start_worker() -> None:
    torch.set_num_threads(1)
    silence()  # the parent reports each pass as it finishes


def _call(index: int) -> Any:
    return _FN(_WORK[index])  # type: ignore[misc]


class PassPool:
    """`with PassPool(fn, work, workers, on_done) as pool: ...; results = list(pool.results())`: fn(w) of every
    work item, in work order; `on_done()` is called as each one finishes (from the pool's own thread when
    forked: a progress bar's update)."""

    def __init__(self, fn: Callable[[Any], Any], work: Sequence[Any], workers: int, on_done: Callable[[], None] = lambda: None) -> None:
        self.fn, self.work, self.workers, self.on_done = fn, list(work), int(workers), on_done
        self._pool: Any = None
        self._pending: list[Any] = []

    def __enter__(self) -> "PassPool":
        global _FN, _WORK
        if self.workers > 1 and self.work:
            if _FN is not None:
                raise RuntimeError("a PassPool is already running in this process")
            _FN, _WORK = self.fn, self.work
            # a worker that dies (e.g. out of memory) fails the run (BrokenProcessPool) instead of leaving it waiting
            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("fork"), initializer=_start_worker)
            self._pending = [self._pool.submit(_call, i) for i in range(len(self.work))]
            for future in self._pending:
                future.add_done_callback(lambda _: self.on_done())
        return self

    def results(self) -> Iterator[Any]:
        """Each pass's result in work order (a pass that raised raises here)."""
        if self._pool is None:
            for w in self.work:
                with one_thread():
                    value = self.fn(w)
                self.on_done()
                yield value
        else:
            for pending in self._pending:
                yield pending.result()

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        global _FN, _WORK
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=kind is not None)
            self._pool, _FN, _WORK = None, None, ()
