"""A tiny zoo for the grid and study tests: four real tiny dual encoders, three tasks and a control.

Models: "clip" and "clip_b" (two CLIPModels of one architecture, different seeds), "siglip" (a
residual-head site) and "wide" (a MetaCLIP-family CLIPModel of another width). A "fine-tune" is a
second checkpoint of the same model (media-tower weights moved by seeded noise, text tower frozen),
which docs/method.md sec. 6 accepts as a descriptor source.
"""

from __future__ import annotations

import copy

import torch

import platonic_sdk as ps
from platonic_sdk.evaluate.measure.workspace import Workspace
from platonic_sdk.worlds.image import ImageWorld

TASKS = ("amber_shapes", "small_shapes", "fine_patterns")
CONTROL = ImageWorld().controls[0]
WIDE = {"projection_dim": 48, "vision_config": {"hidden_size": 48, "intermediate_size": 96}}


def moved(encoder: ps.DualEncoder, seed: int, scale: float = 0.05) -> ps.DualEncoder:
    """A copy whose media tower's floating-point weights moved by scale * N(0, 1) (seeded)."""
    out = copy.deepcopy(encoder)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in out.media_encoder.parameters():
            p.add_(scale * torch.randn(p.shape, generator=gen))
    return out


def build_models() -> dict[str, ps.DualEncoder]:
    return {
        "clip": ps.from_config("clip", seed=0),
        "clip_b": ps.from_config("clip", seed=1),
        "siglip": ps.from_config("siglip", seed=2),
        "wide": ps.from_config("metaclip", WIDE, seed=3),
    }


def build_tasks() -> dict:
    world = ImageWorld(train_per_class=6, test_per_class=5)
    return {name: world.task(name) for name in (*TASKS, CONTROL)}


def build_workspace(models=None, tasks=None, **options) -> Workspace:
    models = models or build_models()
    tasks = tasks or build_tasks()
    finetuned = {(f, t): moved(m, seed=100 * i + j) for i, (f, m) in enumerate(models.items()) for j, t in enumerate(TASKS)}
    options = {"per_class": 3, "ridge_b": 0.1, "batch_size": 32, **options}
    return Workspace(models, tasks, finetuned, controls=[CONTROL], **options)
