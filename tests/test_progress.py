"""The shared progress helper: tqdm on a terminal, one line per stage elsewhere."""

import io
import re
import sys

import pytest
from tqdm.auto import tqdm

from platonic_sdk import progress as progress_module
from platonic_sdk.progress import LineProgress, progress


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.fixture
def clock(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(progress_module.time, "perf_counter", lambda: now[0])
    return now


def test_a_terminal_gets_a_tqdm_bar(monkeypatch):
    monkeypatch.setattr(sys, "stderr", _Stream(tty=True))
    bar = progress(range(3), desc="stage")
    assert isinstance(bar, tqdm) and list(bar) == [0, 1, 2]


def test_a_log_gets_a_line_every_tenth_of_a_long_stage_with_rate_and_time_left(monkeypatch, clock):
    stream = _Stream(tty=False)
    monkeypatch.setattr(sys, "stderr", stream)
    items = []
    for i in progress(range(50), desc="encode clip"):
        items.append(i)
        clock[0] += 0.1  # 5 s in all, 10 items a second
    # silent for the first 2 s (21 items: 42 %, shown as its 40 % mark), then one line per 10 % mark
    lines = stream.getvalue().splitlines()
    assert items == list(range(50)) and lines[-1] == "encode clip: 50/50 in 5.0 s"
    shown = [re.fullmatch(r"encode clip: (\d+)/50 \((\d+)%\), 10/s, about (\d+) s left", line) for line in lines[:-1]]
    assert [(int(m[1]), int(m[2])) for m in shown] == [(21, 40), (25, 50), (30, 60), (35, 70), (40, 80), (45, 90)]
    assert all(abs(int(m[3]) - (50 - int(m[1])) / 10) <= 0.5 + 1e-9 for m in shown)  # seconds left at 10 a second
    with progress(total=10, desc="finetune", leave=False) as bar:
        for _ in range(10):
            bar.update(1)
            bar.set_postfix(loss="0.25")
        clock[0] += 3.0
    assert stream.getvalue().splitlines()[-1] == "finetune: 10/10 in 3.0 s (loss=0.25)"
    before = stream.getvalue()
    list(progress(range(5), desc="quick"))  # under MIN_SECONDS: silent
    with progress(total=2, desc="off", disable=True) as bar:
        clock[0] += 10
    assert isinstance(bar, LineProgress) and stream.getvalue() == before
