"""Presets as data: named settings in `presets/<name>.json`, or a JSON file of one's own with the same shape.

A preset has a `description` and up to two blocks: `method`, CellSettings fields (the descriptor space, the strength
rule, the kinds with row-centred descriptors and anchored solves, fixed strengths), and `experiment`, ExperimentConfig
fields (cells, methods, caps, the sweep, the studies). Built in: `default` (the SDK's default method: CellSettings'
defaults are read from it), `paper` (the paper's exact method: `--paper`, CellSettings.paper()) and `demo` (what
`platonic demo` runs). Light: JSON only, nothing else loads."""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import attrs

from ...errors import PlatonicError

PRESET_DIR = Path(__file__).parent / "presets"
BLOCKS = ("method", "experiment")


@attrs.frozen
class Preset:
    """A named preset: `method` (CellSettings fields) and `experiment` (ExperimentConfig fields), each possibly empty."""

    name: str
    description: str
    method: Mapping[str, Any] = attrs.field(factory=dict, converter=dict)
    experiment: Mapping[str, Any] = attrs.field(factory=dict, converter=dict)


def preset_names() -> list[str]:
    """The built-in presets, sorted."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.json"))


@lru_cache(maxsize=None)
def _read(path: Path) -> Preset:
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise PlatonicError(f"cannot read preset file {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise PlatonicError(f"preset file {path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or set(data) - {"description", *BLOCKS}:
        raise PlatonicError(f"preset file {path}: expected an object with description, method and experiment, "
                            f"got {sorted(data) if isinstance(data, dict) else type(data).__name__}")
    for block in BLOCKS:
        if not isinstance(data.get(block, {}), dict):
            raise PlatonicError(f"preset file {path}: {block} must be an object of settings")
    return Preset(path.stem, str(data.get("description", "")), data.get("method", {}), data.get("experiment", {}))


def preset(name: str | os.PathLike) -> Preset:
    """The built-in preset `name`, or the preset in the JSON file at that path; PlatonicError naming the built-in ones."""
    path = Path(name)
    if path.suffix == ".json":
        return _read(path.resolve())
    if not (PRESET_DIR / f"{name}.json").is_file():
        raise PlatonicError(f"unknown preset {str(name)!r}; the presets are {', '.join(preset_names())}, or a .json file of your own")
    return _read(PRESET_DIR / f"{name}.json")
