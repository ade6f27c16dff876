"""Public names of a package, imported on first use (PEP 562), so that importing the package imports
none of the libraries behind them: `__getattr__, __dir__, __all__ = exports(__name__, {".module": [names]})`."""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable, Mapping, Sequence


def exports(package: str, modules: Mapping[str, Sequence[str]]) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """(`__getattr__`, `__dir__`, `__all__`) for `package`: each name of `modules[m]` is read from the module
    `m` (relative to the package, e.g. ".features" or "..zeroshot") when first asked for, then kept."""
    home = {name: module for module, names in modules.items() for name in names}
    public = sorted(home)

    def __getattr__(name: str) -> Any:
        if name not in home:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home[name], package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(public) | set(vars(sys.modules[package])))

    return __getattr__, __dir__, public
