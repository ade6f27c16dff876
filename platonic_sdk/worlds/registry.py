"""Synthetic worlds by name, each with its shipped zoo and the settings tuned on it.

A world's tuned settings (ridge factors, LoRA-route recipe, strengths, control sets) are data: its
zoo's manifest records them (`zoo_settings.world_settings`, `WorldSpec.settings()`), and a model of
the zoo runs with them unless the user overrides them. A new world is one module defining its world
class and calling `register_world` (docs/architecture.md shows an example); `image`, `audio`,
`real` and `real_audio` are built in.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Callable

import attrs

from ..data.specs import NAMED, NamedTasks, TaskOptions
from ..errors import PlatonicError
from ..named_registry import NamedRegistry
from ..tasks import Task
from ..zoo_settings import WorldSettings, world_settings


@attrs.frozen
class WorldSpec:
    """`make(seed=, train_per_class=, test_per_class=)` builds the world (its class); `zoo` is the folder
    of its shipped models and fine-tunes, whose manifest records the world's tuned settings; `packages`
    names the optional modules its zoo needs to run, which the `platonic-sdk` extra `extra` installs, or the
    command `install` where no extra can (packages installed without their own dependencies)."""

    name: str
    make: Callable[..., Any]
    zoo: Path
    packages: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    extra: str | None = None
    install: str | None = None

    def settings(self) -> WorldSettings:
        """The world's tuned settings, read from its zoo's manifest (zoo_settings.world_settings)."""
        return world_settings(self.zoo)

    def check_packages(self) -> None:
        """Raise PlatonicError naming the missing `packages` and the command that installs them (found without
        importing them: commands call this before any run folder is written or any model loads)."""
        missing = [name for name in self.packages if importlib.util.find_spec(name) is None]
        if missing:
            how = self.install or f"pip install 'platonic-sdk[{self.extra}]' (or -e '.[{self.extra}]' in a clone)"
            raise PlatonicError(f"the {self.name} world needs {', '.join(m.replace('_', '-') for m in missing)}, not installed: {how}")


BUILTIN = {"image": "platonic_sdk.worlds.image", "audio": "platonic_sdk.worlds.audio", "real": "platonic_sdk.worlds.real",
           "real_audio": "platonic_sdk.worlds.real_audio"}
WORLDS: NamedRegistry[WorldSpec] = NamedRegistry("world", listing="registered", sort=True, replaceable=False, lazy=BUILTIN)


def register_world(spec: WorldSpec) -> WorldSpec:
    """Make `spec` available by its name (refused when another world has it)."""
    if WORLDS.get(spec.name) is spec:
        return spec
    WORLDS.register(spec.name, spec)
    return spec


def world_spec(name: str) -> WorldSpec:
    """The registered world `name` (the built-in ones register on first use)."""
    return WORLDS.lookup(name)


def checked_world(name: str) -> str:
    """The canonical spelling of world `name`, after checking that the optional packages its zoo needs are
    installed (WorldSpec.check_packages): what a command checks before it writes a run folder or loads a model."""
    found = WORLDS.check(name)
    world_spec(found).check_packages()
    return found


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
