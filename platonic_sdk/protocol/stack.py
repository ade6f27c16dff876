"""Edit stacks: a model's base weights at every tensor an edit touched, and its applied edits in order.

With base weights theta_0 at the touched tensors and edits e_1 .. e_n applied in that order, the live
weights are always e_n(... e_1(theta_0)). Removing any e_k recomputes the chain without e_k from theta_0,
so the weights equal a fresh application of the remaining edits, bit for bit. Every touched tensor is
fingerprinted after each change; apply and remove refuse weights that changed behind the stack's back.

A stack belongs to tensors, not to a wrapper object: an operator edit on a projection, a LoRA edit on
the media tower and a task vector on that tower share one stack as soon as their tensors overlap. The
stack holds the live tensors weakly, so a model with edits applied is freed like any other.
"""

from __future__ import annotations

import hashlib
import itertools
import weakref
from typing import Any, Callable, Iterable, Mapping

import attrs
import torch
from torch import Tensor, nn
from torch.utils.weak import WeakIdKeyDictionary

from ..errors import NonFiniteError, PlatonicError, ShapeError

# new values of an edit's tensors (by site name) from their current ones; pure: writes nothing
Update = Callable[[dict[str, Tensor]], dict[str, Tensor]]


class WeightsChangedError(PlatonicError, RuntimeError):
    """Weights that an edit stack tracks were changed outside it since its last apply or remove."""


def digest(tensor: Tensor) -> str:
    """blake2b of a tensor's dtype, shape and bytes: equal digests mean equal bits."""
    t = tensor.detach()
    h = hashlib.blake2b(f"{t.dtype}{tuple(t.shape)}".encode(), digest_size=16)
    h.update(t.reshape(-1).contiguous().view(torch.uint8).cpu().numpy())
    return h.hexdigest()


def fingerprint(tensors: Mapping[str, Tensor]) -> str:
    """One digest of named tensors (names in sorted order)."""
    h = hashlib.blake2b(digest_size=16)
    for name in sorted(tensors):
        h.update(f"{name}={digest(tensors[name])};".encode())
    return h.hexdigest()


@attrs.define(eq=False)
class _Tracked:
    ref: weakref.ref
    base: Tensor  # the value before the first edit that touched it
    name: str  # how the first edit called it (for messages)
    print: str = ""  # digest of the live value after the last change


@attrs.define(eq=False)
class _Entry:
    seq: int
    handle: Any  # the applied edit (an Edit, or a task vector's undo handle)
    slots: dict[str, int]  # site name -> tracked slot
    update: Update
    label: str


_SEQ = itertools.count()
_STACKS = WeakIdKeyDictionary()  # live tensor -> the EditStack that tracks it


class EditStack:
    """Base values, fingerprints and the ordered applied edits of a group of live tensors."""

    def __init__(self) -> None:
        self._tracked: dict[int, _Tracked] = {}
        self._entries: list[_Entry] = []
        self._slots = itertools.count()
        self._merged_into: EditStack | None = None

    # -- bookkeeping ------------------------------------------------------------------------------
    def resolve(self) -> "EditStack":
        """The stack this one was merged into (itself if none)."""
        stack = self
        while stack._merged_into is not None:
            stack = stack._merged_into
        return stack

    def _absorb(self, other: "EditStack") -> None:
        """Take over `other`'s tensors and edits (disjoint tensors, so the weights stay as they are)."""
        remap = {}
        for slot, tracked in other._tracked.items():
            remap[slot] = new = next(self._slots)
            self._tracked[new] = tracked
            if (t := tracked.ref()) is not None:
                _STACKS[t] = self
        for entry in other._entries:
            entry.slots = {name: remap[s] for name, s in entry.slots.items()}
        self._entries = sorted(self._entries + other._entries, key=lambda e: e.seq)
        other._tracked, other._entries, other._merged_into = {}, [], self

    def _slot_of(self, tensor: Tensor) -> int | None:
        return next((s for s, tr in self._tracked.items() if tr.ref() is tensor), None)

    def holds(self, handle: Any) -> bool:
        return any(e.handle is handle for e in self._entries)

    def _live(self, slot: int) -> Tensor:
        t = self._tracked[slot].ref()
        if t is None:
            raise WeightsChangedError(f"{self._tracked[slot].name} was replaced by a new tensor since the last edit was applied")
        return t

    def verify(self) -> None:
        """Raise WeightsChangedError unless every tracked tensor still holds the bits the stack left there."""
        for slot, tracked in self._tracked.items():
            if digest(self._live(slot)) != tracked.print:
                raise WeightsChangedError(
                    f"{tracked.name} was changed outside the SDK since the last edit was applied or removed; "
                    "edits on these weights are refused (nothing was changed). Restore the weights, or call "
                    "platonic_sdk.protocol.stack.forget(module) to make the current weights the new base"
                )

    def _replay(self, entries: list[_Entry]) -> dict[int, Tensor]:
        """Values of every tracked tensor after applying `entries` in order to the base values (nothing written)."""
        work = {slot: tr.base for slot, tr in self._tracked.items()}
        for entry in entries:
            current = {name: work[s] for name, s in entry.slots.items()}
            new = _checked(entry.update(current), current, entry.label)
            work.update((s, new[name]) for name, s in entry.slots.items())
        return work

    def _write(self, values: dict[int, Tensor]) -> None:
        """Copy `values` into the live tensors, then fingerprint them."""
        with torch.no_grad():
            for slot, value in values.items():
                self._live(slot).copy_(value)
        for slot in values:
            self._tracked[slot].print = digest(self._live(slot))

    def _settle(self) -> None:
        """Rewrite every tracked tensor as base + the recorded edits (restores the invariant after a failure)."""
        self._write(self._replay(self._entries))

    def _prune(self) -> None:
        """Stop tracking tensors that no applied edit touches (they hold their base values again)."""
        used = {s for e in self._entries for s in e.slots.values()}
        for slot in [s for s in self._tracked if s not in used]:
            tracked = self._tracked.pop(slot)
            if (t := tracked.ref()) is not None and _STACKS.get(t) is self:
                del _STACKS[t]

    # -- the two operations ------------------------------------------------------------------------
    def push(self, handle: Any, sites: Mapping[str, Tensor], update: Update, label: str) -> None:
        """Write `update`'s values into `sites` and record it as the newest edit; on any error nothing changes."""
        self.verify()
        current = {name: t.detach() for name, t in sites.items()}
        new = _checked(update(current), current, label)
        slots = {}
        for name, t in sites.items():
            slot = self._slot_of(t)
            if slot is None:
                slot = next(self._slots)
                self._tracked[slot] = _Tracked(weakref.ref(t), t.detach().clone(), f"{name!r} (first edited by {label})")
            slots[name] = slot
        try:
            self._write({slots[name]: value for name, value in new.items()})
        except BaseException:  # e.g. KeyboardInterrupt between two copies
            self._settle()
            self._prune()
            raise
        self._entries.append(_Entry(next(_SEQ), handle, slots, update, label))
        for t in sites.values():
            _STACKS[t] = self

    def pop(self, handle: Any) -> None:
        """Remove `handle`'s edit wherever it sits: the weights become base + the other edits, in order."""
        entry = next((e for e in self._entries if e.handle is handle), None)
        if entry is None:
            raise PlatonicError("this edit is not applied")
        if all(tracked.ref() is None for tracked in self._tracked.values()):  # the model was freed
            self._entries.remove(entry)
            return
        self.verify()
        before = self._entries
        rest = [e for e in before if e is not entry]
        values = self._replay(rest)
        self._entries = rest
        try:
            self._write(values)
        except BaseException:
            self._entries = before
            self._settle()
            raise
        self._prune()


def _checked(new: dict[str, Tensor], current: Mapping[str, Tensor], label: str) -> dict[str, Tensor]:
    """`new` must replace `current` name for name, in the same shape and dtype, with finite values."""
    if set(new) != set(current):
        raise PlatonicError(f"{label}: update wrote {sorted(new)}, expected {sorted(current)}")
    for name, value in new.items():
        if value.shape != current[name].shape or value.dtype != current[name].dtype:
            raise ShapeError(f"{label}: new {name!r} is {value.dtype} {tuple(value.shape)}, the weight is {current[name].dtype} {tuple(current[name].shape)}")
        if not torch.isfinite(value).all():
            bad = int((~torch.isfinite(value)).sum())
            raise NonFiniteError(f"{label} would write {bad} NaN/inf value(s) into {name!r}; nothing was changed")
    return new


def stack_of(tensors: Iterable[Tensor]) -> EditStack:
    """The stack tracking any of `tensors` (merging stacks when they span several), or a new empty one."""
    found: list[EditStack] = []
    for t in tensors:
        s = _STACKS.get(t)
        if s is not None and all(s is not f for f in found):
            found.append(s)
    if not found:
        return EditStack()
    first = found[0]
    for other in found[1:]:
        first._absorb(other)
    return first


def push(handle: Any, sites: Mapping[str, Tensor], update: Update, label: str, model: nn.Module) -> EditStack:
    """Apply `update` to the live `sites` of `model` and record `handle` on the model's stack.

    The stack is the one over all of `model`'s tensors, so weights changed anywhere in it since the last
    apply or remove are refused, not only those at `sites`. On any error nothing changes.
    """
    if not sites:
        raise PlatonicError(f"{label} touches no tensor")
    stack = stack_of([*sites.values(), *model.parameters(), *model.buffers()])
    stack.push(handle, sites, update, label)
    return stack


def base_values(sites: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """Each tensor's value before any applied edit (its current value when no stack tracks it)."""
    out = {}
    for name, t in sites.items():
        stack = _STACKS.get(t)
        slot = stack._slot_of(t) if stack is not None else None
        out[name] = stack._tracked[slot].base if slot is not None else t.detach()
    return out


def _stacks_in(module: nn.Module) -> list[EditStack]:
    out: list[EditStack] = []
    for t in itertools.chain(module.parameters(), module.buffers()):
        s = _STACKS.get(t)
        if s is not None and all(s is not f for f in out):
            out.append(s)
    return out


def applied(module: nn.Module) -> list[Any]:
    """Every edit applied to `module`'s tensors, in the order they were applied."""
    entries = [e for s in _stacks_in(module) for e in s._entries]
    return [e.handle for e in sorted(entries, key=lambda e: e.seq)]


def identical(module: nn.Module, kind: type, tensors_of: Callable[[Any], Mapping[str, Tensor]],
              tensors: Mapping[str, Tensor]) -> Any | None:
    """The first handle of type `kind` applied to `module` whose tensors (`tensors_of(handle)`) equal `tensors`
    bit for bit, else None; tensors are hashed only when a handle with the same names and shapes is applied."""
    shapes = lambda named: {k: tuple(v.shape) for k, v in named.items()}  # noqa: E731
    alike = [h for h in applied(module) if type(h) is kind and shapes(tensors_of(h)) == shapes(tensors)]
    if not alike:
        return None
    mine = fingerprint(tensors)
    return next((h for h in alike if fingerprint(tensors_of(h)) == mine), None)


def forget(module: nn.Module) -> None:
    """Drop every stack over `module`'s tensors: the current weights become the base; those edits count as removed."""
    for stack in _stacks_in(module):
        for tracked in stack._tracked.values():
            if (t := tracked.ref()) is not None and _STACKS.get(t) is stack:
                del _STACKS[t]
        stack._tracked, stack._entries = {}, []
