"""Progress of long stages, one helper for the whole SDK: a tqdm bar when stderr is a terminal;
otherwise (logs, CI, pipes) one line per stage when it ends, and only for stages that took at least
`MIN_SECONDS`, instead of kilobytes of bar redraws. Under torch.distributed only rank 0 shows progress.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Iterable, Iterator

import torch.distributed as dist
from tqdm.auto import tqdm

MIN_SECONDS = 2.0


class LineProgress:
    """tqdm's small interface (iterate, update, set_postfix, close, `with`) that writes one summary line at close."""

    def __init__(self, iterable: Iterable[Any] | None = None, desc: str = "", total: int | None = None,
                 disable: bool = False, min_seconds: float | None = None) -> None:
        self.iterable, self.desc, self.disable = iterable, desc, disable
        self.min_seconds = MIN_SECONDS if min_seconds is None else min_seconds
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)  # type: ignore[arg-type]
        self.total, self.n, self.postfix, self.closed = total, 0, "", False
        self.started = time.perf_counter()

    def __iter__(self) -> Iterator[Any]:
        try:
            for item in self.iterable or ():
                yield item
                self.n += 1
        finally:
            self.close()

    def update(self, n: int = 1) -> None:
        self.n += n

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
        postfix = f" ({self.postfix})" if self.postfix else ""
        print(f"{self.desc or 'progress'}: {count} in {seconds:.1f} s{postfix}", file=sys.stderr, flush=True)

    def __enter__(self) -> "LineProgress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress(iterable: Iterable[Any] | None = None, desc: str = "", total: int | None = None, disable: bool = False,
             leave: bool = True, **options: Any) -> Any:
    """A progress bar over `iterable` (or one updated by hand): tqdm on a terminal, else a `LineProgress`;
    disabled on every rank but 0 of a process group."""
    disable = disable or (dist.is_available() and dist.is_initialized() and dist.get_rank() != 0)
    if not disable and sys.stderr.isatty():
        return tqdm(iterable, desc=desc, total=total, leave=leave, **options)
    return LineProgress(iterable, desc, total, disable)
