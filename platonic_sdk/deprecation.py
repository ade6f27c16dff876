"""Renamed public names: the old spelling keeps working for one release, with a DeprecationWarning.

`renamed_keywords(old="new")` wraps a function (or an attrs class's `__init__`) so that `old=` is
passed on as `new=`; `renamed_attribute("new")` is a read-only attribute under the old name;
`renamed_globals(globals(), OLD="NEW")` is a module `__getattr__` for a module-level name. All
warn once per call site (Python's default filter), naming the new spelling; passing both spellings
is a TypeError, as a keyword given twice is.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def warn_renamed(old: str, new: str, stacklevel: int = 3) -> None:
    """Warn that `old` is deprecated in favour of `new`."""
    warnings.warn(f"{old} is deprecated and will be removed in the next release; use {new}", DeprecationWarning, stacklevel=stacklevel)


def renamed_keywords(**renames: str) -> Callable[[F], F]:
    """Decorator: keyword `old` (a key of `renames`) is accepted as `renames[old]`, with a warning."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            for old, new in renames.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{fn.__qualname__}() got {new}= and its deprecated name {old}=; pass {new}= only")
                    warn_renamed(f"{fn.__qualname__}({old}=)", f"{new}=")
                    kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        return call  # type: ignore[return-value]

    return wrap


def renamed_init(cls: type, **renames: str) -> type:
    """`cls` (an attrs class) whose constructor also takes the deprecated keywords in `renames`."""
    cls.__init__ = renamed_keywords(**renames)(cls.__init__)  # type: ignore[misc]
    return cls


def renamed_globals(namespace: dict[str, Any], **renames: str) -> Callable[[str], Any]:
    """A module's `__getattr__` (assign it as such): the old module-level name `OLD` returns the module's
    `renames[OLD]`, with a warning; any other missing name is an AttributeError as usual."""
    module = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        if name not in renames:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warn_renamed(f"{module}.{name}", f"{module}.{renames[name]}")
        return namespace[renames[name]]

    return __getattr__


class renamed_attribute:
    """A read-only attribute, under an attribute's old name, that warns and returns the attribute `new`."""

    def __init__(self, new: str) -> None:
        self.new, self.old = new, "?"
        self.__doc__ = f"Deprecated name of `{new}`."

    def __set_name__(self, owner: type, name: str) -> None:
        self.old = f"{owner.__name__}.{name}"

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        warn_renamed(self.old, f".{self.new}")
        return getattr(obj, self.new)
