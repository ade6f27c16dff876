"""Synthetic worlds by name, each with its shipped zoo and the settings tuned on it.

A model of a world's zoo runs with the world's settings (ridge factors, LoRA-route recipe) unless
the user overrides them. A new world is one module defining its world class and calling
`register_world` (docs/architecture.md shows an example); `image` and `audio` are built in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

import attrs

from ..named_registry import NamedRegistry


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
    """Make `spec` available by its name (refused when another world has it)."""
    return spec if WORLDS.get(spec.name) is spec else WORLDS.register(spec.name, spec)


def world_spec(name: str) -> WorldSpec:
    """The registered world `name` (the built-in ones register on first use)."""
    return WORLDS.lookup(name)


def world_names() -> list[str]:
    """The registered worlds and the built-in ones (loaded or not), sorted."""
    return WORLDS.names()
