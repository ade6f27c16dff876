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
    """fn(workspace, cell, settings): fit sign * sum_l UTD_l (sign -1 for negation), deploy at the cell's strength.

    Both routes then realise the same thing: the closed form folds alpha * A(sum_l U_l) (negation:
    strength * A(-U)), the route folds alpha (or strength) times its fitted LoRA delta. `deploy`
    overrides that strength (None: settings.alpha for addition, settings.strength for negation).
    """

    config: LoraRouteConfig = attrs.field(factory=LoraRouteConfig)
    deploy: float | None = None

    def __call__(self, ws: Workspace, cell: Any, settings: Any) -> dict[str, float]:
        sign, strength = (1.0, settings.alpha) if cell.kind == "addition" else (-1.0, settings.strength)
        terms = [sign * ws.descriptor(source, task) for source, task in zip(cell.sources, cell.tasks)]
        composition = sum(terms[1:], terms[0])
        edit = fit_lora(ws.models[cell.target], composition, [ws.grid(t) for t in cell.tasks], self.config, progress=False)
        names = list(cell.tasks) + [c for c in ws.controls if c not in cell.tasks]
        return ws.live_accuracies(cell.target, names, edit.scaled(strength if self.deploy is None else self.deploy))
