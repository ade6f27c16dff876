"""The LoRA route as a cell method: fit the cell's composition on the target, re-encode, measure.

Unlike the closed form, a LoRA edit changes the media tower itself, so its accuracies come from real
forward passes of the edited target (no cached features); the fit sees only the cell's probe grids.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import attrs

from ..transfer.lora import LoraRouteConfig, fit_lora
from .workspace import Workspace

CellMethod = Callable[[Workspace, Any, Any], Mapping[str, float]]


@attrs.frozen
class LoraCellMethod:
    """fn(workspace, cell, settings): addition fits sum_l UTD_l, negation fits -strength * UTD; deployed at `deploy`.

    `deploy` scales the fitted LoRA delta (1.0: the route at its own strength, as in the paper).
    """

    config: LoraRouteConfig = attrs.field(factory=LoraRouteConfig)
    deploy: float = 1.0

    def __call__(self, ws: Workspace, cell: Any, settings: Any) -> dict[str, float]:
        coef = 1.0 if cell.kind == "addition" else -settings.strength
        terms = [coef * ws.descriptor(source, task) for source, task in zip(cell.sources, cell.tasks)]
        composition = sum(terms[1:], terms[0])
        edit = fit_lora(ws.models[cell.target], composition, [ws.grid(t) for t in cell.tasks], self.config, progress=False)
        names = list(cell.tasks) + [c for c in ws.controls if c not in cell.tasks]
        return ws.live_accuracies(cell.target, names, edit.scaled(self.deploy))
