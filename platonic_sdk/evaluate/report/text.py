"""How a report writes numbers and tables: counts with their plural, rounded JSON, percentages, markdown tables."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np


def plural(n: int, word: str, many: str | None = None) -> str:
    """`1 cell`, `2 cells`, `0 cells` (`many` for irregular plurals)."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def rounded(value: Any, digits: int = 2) -> Any:
    """`value` (JSON-like: dicts, lists, numbers) with every float rounded to `digits` decimals, as the tables
    print them: 33.33333432674408 -> 33.33. For JSON printed for people; the run's files keep every digit."""
    if isinstance(value, float):
        return round(value, digits) if np.isfinite(value) else value
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(v, digits) for v in value]
    return value


def finite(value: Any) -> bool:
    """Whether `value` is a number that is neither None nor NaN nor infinite."""
    return value is not None and bool(np.isfinite(value))


def percent(share: float | None) -> str | None:
    """A share (a fraction) as a whole percentage, "38%"; None when there is none."""
    return f"{100 * share:.0f}%" if finite(share) else None


def signed(points: float) -> str:
    """Points with their sign and one decimal: +8.3, -19.0 (0.0 for a value that rounds to zero)."""
    return f"{points:+.1f}".replace("-0.0", "0.0").replace("+0.0", "0.0")


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table; floats print with two decimals (a value that rounds to zero as 0.00, never -0.00), None and NaN as a dash."""
    fmt = lambda v: "-" if v is None or (isinstance(v, float) and np.isnan(v)) else (  # noqa: E731
        f"{v:.2f}".replace("-0.00", "0.00") if isinstance(v, float) else str(v))
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else float("nan")
