"""The experiment runner across torch.distributed ranks (`torchrun`; see platonic_sdk.encoding.distributed).

Every rank builds the same workspace and runs the same spec (`same_settings` refuses otherwise).
Extraction is split over the ranks: `warm` fills every cache the cells read, in one order on every
rank, each encoding split into runs of whole batches. The cells are then dealt round-robin in rounds
(`run_cells`), their records gathered after each round; rank 0 alone writes the run folder, runs the
studies that follow the cells and renders the report. A single process runs the same code plainly.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, ContextManager, Mapping, Sequence

from ...encoding import distributed
from ...errors import PlatonicError
from ...progress import progress as progress_bar
from ..measure.cells import Cell, cell_keep_sets, eval_names
from ..measure.workspace import Workspace
from ..plan.settings import CellSettings
from .runfolder import RunFolder, setting_differences

ROUND = 8  # cells per rank between two gathers: what a killed run loses at most, per rank


def rank_folder(path: str | os.PathLike) -> ContextManager[RunFolder | str | os.PathLike]:
    """`with rank_folder(path) as out:` locks the run folder on rank 0 (before any model loads); other
    ranks get the bare path and never touch it (run_experiment accepts either)."""
    return RunFolder(path) if distributed.rank_and_world()[0] == 0 else contextlib.nullcontext(path)


def same_settings(settings: Mapping[str, Any]) -> None:
    """Refuse, on every rank, a run whose ranks were started with different settings, naming what differs."""
    everyone = distributed.gather_objects(dict(settings))
    for rank, other in enumerate(everyone[1:], 1):
        diff = setting_differences(everyone[0], other)
        if diff:
            shown = "; ".join(diff[:6]) + (f"; and {len(diff) - 6} more" if len(diff) > 6 else "")
            raise PlatonicError(f"rank {rank} was started with other settings than rank 0 ({shown}); "
                                "start every rank with the same arguments, models and data")


def warm(ws: Workspace, cells: Sequence[Cell], settings: CellSettings | None = None) -> None:
    """Fill every workspace cache the cached cell methods read, in cell order (on every rank, inside
    `distributed.sharding()`: the encodings are then split over the ranks); under `settings` that keep labels, each
    target's view of the cell's labelled keep sets too (OperatorBank.keep_view)."""
    for cell in cells:
        if settings is not None and settings.keep == "labels":
            for keep in cell_keep_sets(ws, cell):
                ws.bank(cell.target).keep_view(keep)
        for name in eval_names(ws, cell):
            ws.eval_set(cell.target, name)
        for source, task in zip(cell.sources, cell.tasks):
            ws.grid_state(cell.target, task)
            ws.descriptor(source, task)
        for task in cell.tasks:
            if (cell.target, task) in ws.finetuned:  # the oracle's descriptor and the normaliser
                ws.descriptor(cell.target, task)
                ws.finetuned_accuracy(cell.target, task)


def run_cells(work: Sequence[tuple[str, Cell, tuple[str, ...]]], evaluate: Callable[[tuple[str, Cell, tuple[str, ...]]], dict[str, Any]],
              finished: Callable[[dict[str, Any]], None], progress: bool = False) -> None:
    """evaluate(pass) for every (key, cell, methods) pass; finished(record) on rank 0 in pass order.

    One process: one pass at a time. Several ranks: rounds of ROUND passes per rank, dealt round-robin
    and gathered after each round; a pass that raises fails the run on every rank, naming it and its rank,
    and so does a failure of `finished` on rank 0.
    """
    world = distributed.rank_and_world()[1]
    step = 1 if world == 1 else ROUND * world
    with progress_bar(total=len(work), desc="cells", disable=not progress) as bar:
        for start in range(0, len(work), step):
            chunk = work[start : start + step]
            records = distributed.map_sharded(evaluate, chunk, label=lambda i, p: f"cell {p[0]}")

            def record_round() -> None:  # on rank 0; its failure stops every rank
                for record in records:
                    finished(record)
            distributed.on_rank0(record_round)
            bar.update(len(chunk))
