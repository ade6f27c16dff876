"""Family registry: a family name maps to its adapter's loader, config builder and default checkpoint.

Adding a family is one `register_family` call (see docs/architecture.md); the core never lists families.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Callable

import attrs

from .errors import UnknownFamilyError
from .named_registry import NamedRegistry
from .protocol import DualEncoder, read_marker


@attrs.frozen
class FamilySpec:
    """How to build one family: `load(checkpoint, **options)` and `from_config(config=None, **options)`.

    `load` reads a hub id, open_clip pretrained tag, local folder or file; `from_config` builds random
    weights from a (small) config dict, which is how tests and the synthetic worlds make models.
    """

    name: str
    modality: str
    default_checkpoint: str | None
    load: Callable[..., DualEncoder]
    from_config: Callable[..., DualEncoder]
    description: str = ""


_FAMILIES: NamedRegistry[FamilySpec] = NamedRegistry("family", listing="known families", sort=True,
                                                     missing_error=UnknownFamilyError, taken_error=ValueError)
# Built-in adapters, imported on first use so that `import platonic_sdk` stays fast.
_BUILTIN_MODULES = ("clip", "openclip", "siglip", "evaclip", "clap")
_builtins_loaded = False
_unavailable: dict[str, str] = {}  # built-in adapter module -> why it could not be imported


def register_family(spec: FamilySpec, *, replace: bool = False) -> FamilySpec:
    """Make `spec.name` loadable through `platonic_sdk.load`."""
    return _FAMILIES.register(spec.name, spec, replace=replace)


def _load_builtins() -> None:
    global _builtins_loaded
    if _builtins_loaded:
        return
    _builtins_loaded = True
    for module in _BUILTIN_MODULES:
        try:
            importlib.import_module(f"platonic_sdk.adapters.{module}")
        except ModuleNotFoundError as exc:  # an optional model library is not installed: skip its families
            if exc.name is None or exc.name.startswith("platonic_sdk"):
                raise
            _unavailable[module] = f"needs the '{exc.name}' package"


def family(name: str) -> FamilySpec:
    """The registered spec of `name`, or UnknownFamilyError listing the known ones."""
    _load_builtins()
    missing = "".join(f"; adapters.{m} is unavailable ({why})" for m, why in sorted(_unavailable.items()))
    return _FAMILIES.lookup(name, note=missing)


def list_families(modality: str | None = None) -> list[str]:
    """Names of the registered families, optionally of one modality."""
    _load_builtins()
    return [n for n in _FAMILIES.names() if modality is None or _FAMILIES[n].modality == modality]


def load(family_name: str, checkpoint: str | None = None, **options: Any) -> DualEncoder:
    """Load `family_name` from `checkpoint` (default: the family's reference checkpoint)."""
    spec = family(family_name)
    source = checkpoint or spec.default_checkpoint
    encoder = spec.load(source, **options)
    if source is not None and os.path.isdir(source):  # edits folded in by `save` are refused a second time
        encoder.folded_edits = tuple(read_marker(source).get("folded_edits", ()))
    return encoder


def from_config(family_name: str, config: dict | None = None, **options: Any) -> DualEncoder:
    """Build `family_name` with random weights from a config (None: the family's tiny test config)."""
    return family(family_name).from_config(config, **options)
