"""The settings a run used, at the end of its report: every setting by its name, its value in words where a bare
value would mislead (an empty list is "none", a strength rule is named as a user names it and says what it
chose, no rule is the fixed strengths), and what became of the run's cells.
"""

from __future__ import annotations

from typing import Any, Mapping

from ...strength import DEFAULT_BUDGET, DEFAULT_CONFIDENCE
from .names import METHODS_RULED_WORDS, fixed_words, rule_name
from .text import plural, table


def cells_run(cells: Mapping[str, int]) -> str:
    """What the run did with its cells: how many records, from how many (cell, methods) passes, run now or resumed."""
    records, passes, resumed = cells["records"], cells["passes"], cells.get("resumed", 0)
    ran = passes - resumed
    how = ("all run fresh, none resumed" if not resumed else "all resumed from cells.jsonl, none run fresh" if not ran
           else f"{ran} run fresh, {resumed} resumed from cells.jsonl")
    return f"{plural(records, 'cell')} from {plural(passes, 'pass', 'passes')} (a pass runs one cell with a set of methods): {how}"


def value_words(key: str, value: Any, settings: Mapping[str, Any]) -> str:
    """A setting's value as the table gives it."""
    if key == "strength_rule":
        if value is None:
            return fixed_words(settings.get("addition_strength", 0.5), settings.get("negation_strength", 1.0))
        fixed = fixed_words(settings.get("addition_strength", 0.5), settings.get("negation_strength", 1.0))
        return (rule_name(value) + (f" ({value})" if rule_name(value) != value else "")
                + f": {METHODS_RULED_WORDS} at the strength it chose per cell, the other methods {fixed}")
    if key == "keep":
        return (f"{value}: the strength rule reads the other transfer tasks' unlabelled probe grids" if value != "labels" else
                f"{value}: the strength rule spends the budgets on the labelled train splits of the controls and the other transfer tasks")
    if key in ("addition_budget", "negation_budget", "confidence") and value is None:
        return ("not read (keep probes)" if settings.get("keep") != "labels"
                else f"the library's ({DEFAULT_CONFIDENCE:g} confidence)" if key == "confidence" else f"the library's ({DEFAULT_BUDGET:g} points)")
    if key == "similarity_probes" and value is None:
        return "every probe of each grid"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {v}" for k, v in value.items()) or "none"
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value)) or "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "none" if value is None else str(value)


def settings_section(summary: Mapping[str, Any]) -> str:
    """## Settings: the world or benchmark, the experiment's spec, the cell settings (the LoRA route's recipe as
    `lora <field>` rows) and what became of the cells."""
    config = summary["config"]
    settings = config["settings"]
    flat = {**config.get("describe", {}), **{k: v for k, v in config.items() if k not in ("describe", "settings", "cells")},
            **{k: v for k, v in settings.items() if k != "lora"}, **{f"lora {k}": v for k, v in settings["lora"].items()}}
    rows = [[k, value_words(k, v, settings)] for k, v in flat.items()]
    rows.append(["cells", "; ".join(f"{c['kind']} {c['group']}" + (f" (at most {c['max_cells']})" if c["max_cells"] is not None else "")
                                    + (f" [{', '.join(c['methods'])}]" if c["methods"] else "") for c in config["cells"]) or "none"])
    if "cells" in summary:
        rows.append(["cell records", cells_run(summary["cells"])])
    return "## Settings\n\n" + table(["setting", "value"], rows)
