"""Synthetic worlds by name, each with its shipped zoo and the settings tuned on it.

A model of a world's zoo runs with the world's settings (ridge factors, LoRA-route recipe) unless
the user overrides them. A new world is one module defining its world class and calling
`register_world` (docs/architecture.md shows an example); `image` and `audio` are built in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

import attrs

from ..data.specs import NAMED, NamedTasks, TaskOptions
from ..named_registry import NamedRegistry
from ..ridge import register_zoo
from ..tasks import Task


@attrs.frozen
class WorldSpec:
    """`make(seed=, train_per_class=, test_per_class=)` builds the world (its class); `zoo` is the folder
    of its shipped models and fine-tunes; ridge_a / ridge_b (relative) and `lora` (the LoRA route's
    recipe, as LoraRouteConfig fields) are its tuned settings."""

    name: str
    make: Callable[..., Any]
    zoo: Path
    ridge_a: float
    ridge_b: float
    lora: Mapping[str, Any] = attrs.field(factory=dict, converter=dict)  # LoraRouteConfig fields


BUILTIN = {"image": "platonic_sdk.worlds.image", "audio": "platonic_sdk.worlds.audio", "real": "platonic_sdk.worlds.real"}
WORLDS: NamedRegistry[WorldSpec] = NamedRegistry("world", listing="registered", sort=True, replaceable=False, lazy=BUILTIN)


def register_world(spec: WorldSpec) -> WorldSpec:
    """Make `spec` available by its name (refused when another world has it); the members of its zoo
    run with its ridge (ridge.register_zoo) unless the user gives one."""
    if WORLDS.get(spec.name) is spec:
        return spec
    WORLDS.register(spec.name, spec)
    register_zoo(spec.zoo, spec.name, spec.ridge_a, spec.ridge_b)
    return spec


def world_spec(name: str) -> WorldSpec:
    """The registered world `name` (the built-in ones register on first use)."""
    return WORLDS.lookup(name)


def world_names() -> list[str]:
    """The registered worlds and the built-in ones (loaded or not), sorted."""
    return WORLDS.names()


def _world(name: str, options: TaskOptions) -> Any:
    sizes = {k: v for k, v in (("train_per_class", options.train_per_class), ("test_per_class", options.test_per_class)) if v is not None}
    return world_spec(name).make(seed=options.world_seed, **sizes)  # unset sizes: the world's


def _task_names(options: TaskOptions) -> list[str]:
    return [t for w in world_names() for t in _world(w, options).task_names]


def _task(name: str, options: TaskOptions) -> Task:
    worlds = (_world(w, options) for w in world_names())
    return next(world.task(name) for world in worlds if name in world.task_names)


NAMED.register("worlds", NamedTasks(_task_names, _task))  # task specs may name any world's task
