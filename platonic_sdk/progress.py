"""Progress of long stages, one helper for the whole SDK: a tqdm bar when stderr is a terminal;
otherwise (logs, CI, pipes) a line at every `STEP_PERCENT` of a stage of known length once it has run
`MIN_SECONDS` (count, rate, time left), and one line when a stage of at least `MIN_SECONDS` ends, instead
of kilobytes of bar redraws. Under torch.distributed only rank 0 shows progress, and a worker process
(`silence`) none: its parent reports for it.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Iterable, Iterator

import torch.distributed as dist
from tqdm.auto import tqdm

MIN_SECONDS = 2.0
STEP_PERCENT = 10


class LineProgress:
    """tqdm's small interface (iterate, update, set_postfix, close, `with`) that writes a line every
    `STEP_PERCENT` of `total` (after `min_seconds`) and a summary line at close."""

    def __init__(self, iterable: Iterable[Any] | None = None, desc: str = "", total: int | None = None,
                 disable: bool = False, min_seconds: float | None = None) -> None:
        self.iterable, self.desc, self.disable = iterable, desc, disable
        self.min_seconds = MIN_SECONDS if min_seconds is None else min_seconds
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)  # type: ignore[arg-type]
        self.total, self.n, self.postfix, self.closed = total, 0, "", False
        self.started = time.perf_counter()
        self.shown = 0  # the last percentage mark a line was written for

    def __iter__(self) -> Iterator[Any]:
        try:
            for item in self.iterable or ():
                yield item
                self.update()
        finally:
            self.close()

    def update(self, n: int = 1) -> None:
        self.n += n
        if self.disable or not self.total or self.n >= self.total:
            return
        mark = 100 * self.n // self.total // STEP_PERCENT * STEP_PERCENT
        seconds = time.perf_counter() - self.started
        if mark > self.shown and seconds >= self.min_seconds:
            self.shown = mark
            rate = self.n / seconds
            left = (self.total - self.n) / rate
            print(f"{self.desc or 'progress'}: {self.n}/{self.total} ({mark}%), {rate:.3g}/s, about {left:.0f} s left{self._postfix()}",
                  file=sys.stderr, flush=True)

    def _postfix(self) -> str:
        return f" ({self.postfix})" if self.postfix else ""

    def set_postfix(self, ordered_dict: dict[str, Any] | None = None, refresh: bool = True, **kwargs: Any) -> None:
        self.postfix = ", ".join(f"{k}={v}" for k, v in {**(ordered_dict or {}), **kwargs}.items())

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        self.postfix = s

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        seconds = time.perf_counter() - self.started
        if self.disable or seconds < self.min_seconds:
            return
        count = f"{self.n}/{self.total}" if self.total is not None else str(self.n)
        print(f"{self.desc or 'progress'}: {count} in {seconds:.1f} s{self._postfix()}", file=sys.stderr, flush=True)

    def __enter__(self) -> "LineProgress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_SILENT: list[bool] = []


def silence() -> None:
    """Show no progress in this process from now on: a worker process, whose parent reports its work."""
    _SILENT.append(True)


def progress(iterable: Iterable[Any] | None = None, desc: str = "", total: int | None = None, disable: bool = False,
             leave: bool = True, **options: Any) -> Any:
    """A progress bar over `iterable` (or one updated by hand): tqdm on a terminal, else a `LineProgress`;
    disabled on every rank but 0 of a process group."""
    disable = disable or bool(_SILENT) or (dist.is_available() and dist.is_initialized() and dist.get_rank() != 0)
    if not disable and sys.stderr.isatty():
        return tqdm(iterable, desc=desc, total=total, leave=leave, **options)
    return LineProgress(iterable, desc, total, disable)
