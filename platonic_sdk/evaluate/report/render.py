"""report.md of a run, from its report.json content (summaries.py) and its studies (studies.json).

A newcomer reads it top down: a summary in plain words (summary.py), the results (cell_tables.py: a table of
methods per kind and group, the paper's layout, docs/method.md sec. 9; study_tables.py: the sweep, the
frontiers with the run's own point, the other studies), the headline figures and what contradicts the paper,
the paper's reference figures (paper.py), the wall times, a glossary of the terms used (glossary.py), and the
settings at the end (settings_table.py).
"""

from __future__ import annotations

from typing import Any, Mapping

from .cell_tables import (cells_section, figure_link, figures_section, per_task_section, said, same_cells_sections,
                          similarity_section)
from .glossary import glossary_section
from .names import ORDER, SLOTS, group_key, method_label  # noqa: F401  (method_label: re-exported for benchmarks)
from .paper import paper_reference
from .settings_table import settings_section
from .study_tables import (accumulation_section, frontier_section, guarantee_section, held_out_section, orthoreg_section,
                           sweep_section)
from .summaries import checks, summarise, summarise_run  # noqa: F401  (re-exported: the runner and tests read them here)
from .summary import summary_section
from .text import plural, rounded, table  # noqa: F401  (re-exported: the command line formats with them)


def render(summary: dict[str, Any], title: str = "platonic grid", studies: Mapping[str, Any] | None = None) -> str:
    """The whole report.md of a run from its report.json content (and studies.json for the study tables)."""
    studies = studies or summary.get("studies", {})
    settings = summary["config"]["settings"]
    rule, space = settings.get("strength_rule"), settings.get("space")
    strengths = {kind: settings[f"{kind}_strength"] for kind in SLOTS}
    body = [summary_section(summary)]
    if "similarity" in summary:
        body.append(similarity_section(summary))
    for kind, group in ORDER:
        if group_key(kind, group) in summary:
            body.append(cells_section(summary, kind, group, strengths[kind], space, rule)
                        + (said(summary, kind) if group == "cross-family" else "")
                        + (figure_link(summary, "scatter") if kind == "addition" and group == "cross-family" else ""))
    body += same_cells_sections(summary, strengths, space, rule)
    if any(r["method"] == "closed_form" for r in studies.get("sweep") or ()):
        body.append(sweep_section(studies["sweep"], summary, rule, space))
    if summary.get("frontier"):
        body.append(frontier_section(summary))
    if studies.get("accumulation"):
        body.append(accumulation_section(studies["accumulation"], summary, rule))
    if "held_out" in summary:
        body.append(held_out_section(summary["held_out"], rule))
    if studies.get("guarantee"):
        body.append(guarantee_section(studies["guarantee"]))
    if "orthoreg" in summary:
        body.append(orthoreg_section(summary["orthoreg"]))
    if summary.get("per_task"):
        body.append(per_task_section(summary, strengths["addition"], rule))
    body.append(figures_section(summary))
    if (reference := paper_reference(summary)) is not None:
        body.append(reference)
    body.append("## Wall times\n\n" + table(["stage", "wall time (s)"], [[k, v] for k, v in summary.get("timings", {}).items()]))
    end = settings_section(summary)
    return "\n\n".join([f"# {title}", *body, glossary_section("\n\n".join([*body, end]), rule), end]) + "\n"
