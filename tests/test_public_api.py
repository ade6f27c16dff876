"""The public API refuses keywords it does not take: no public callable swallows `**kwargs`.

Walks `platonic_sdk.__all__` and every subpackage's lazy exports, and each exported class's public
methods (its own and those inherited from SDK classes). Free metadata goes in one explicit dict
(`meta=` / `provenance=` / `metadata=`); a misspelt keyword is then a TypeError naming it.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any, Callable, Iterator

import pytest
import torch

import platonic_sdk as ps

PACKAGES = ["platonic_sdk", "platonic_sdk.data", "platonic_sdk.edits", "platonic_sdk.encoding", "platonic_sdk.evaluate", "platonic_sdk.finetune", "platonic_sdk.protocol",
            "platonic_sdk.transfer"]

# The only `**` parameters of the public API: pass-throughs whose receiver checks the names itself.
PASS_THROUGH = {
    "platonic_sdk.registry.load": "a family's own load options (its adapter's loader takes named parameters)",
    "platonic_sdk.registry.from_config": "a family's own build options (its adapter's builder takes named parameters)",
    "platonic_sdk.finetune.weightspace.merge": "the merge method's parameters, bound against its signature before merging",
}


def _is_sdk(obj: Any) -> bool:
    return getattr(obj, "__module__", "").startswith("platonic_sdk")


def _methods(cls: type) -> Iterator[tuple[str, Callable]]:
    """(qualified name, callable) of the class's constructor and public methods defined in SDK classes."""
    if any("__init__" in vars(k) for k in cls.__mro__ if _is_sdk(k)) and not issubclass(cls, BaseException):
        yield f"{cls.__module__}.{cls.__qualname__}", cls.__init__
    for name in dir(cls):
        if name.startswith("_"):
            continue
        owner = next((k for k in cls.__mro__ if name in vars(k)), None)
        if owner is None or not _is_sdk(owner):
            continue
        raw = vars(owner)[name]
        if isinstance(raw, (staticmethod, classmethod)):
            raw = raw.__func__
        if inspect.isfunction(raw):
            yield f"{owner.__module__}.{owner.__qualname__}.{name}", raw


def public_callables() -> dict[str, Callable]:
    """Every public function, constructor and method, by its defining module's qualified name."""
    found: dict[str, Callable] = {}
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj) and _is_sdk(obj):
                found.update(_methods(obj))
            elif inspect.isfunction(obj) and _is_sdk(obj):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


def test_the_walk_sees_the_api():
    """The walk reaches the functions and methods a user calls (so the test below can fail)."""
    names = public_callables()
    for expected in ("platonic_sdk.descriptor.UTD.compute", "platonic_sdk.transfer.closed_form.OperatorBank.edit",
                     "platonic_sdk.evaluate.measure.feature_cache.FeatureCache.build", "platonic_sdk.finetune.weightspace.TaskVector.from_models",
                     "platonic_sdk.edits.edit.Edit.apply", "platonic_sdk.registry.load", "platonic_sdk.data.images.image_folder_task"):
        assert expected in names
    assert len(names) > 100


def test_no_public_callable_swallows_keywords():
    swallowing = sorted(name for name, fn in public_callables().items()
                        if any(p.kind is p.VAR_KEYWORD for p in inspect.signature(fn).parameters.values()))
    assert swallowing == sorted(PASS_THROUGH), "public callables with **kwargs (take an explicit dict instead): " + \
        ", ".join(n for n in swallowing if n not in PASS_THROUGH)


@pytest.fixture(scope="module")
def tiny(caption_tokenizer):
    """A tiny CLIP, a fine-tune of it (its projection moved by hand), and a grid."""
    clip = ps.from_config("clip", None, tokenizer=caption_tokenizer, seed=0)
    tuned = ps.from_config("clip", None, tokenizer=caption_tokenizer, seed=0)
    with torch.no_grad():
        tuned.last_affine().weight.add_(0.05 * torch.randn(tuned.last_affine().weight.shape, generator=torch.Generator().manual_seed(1)))
    from platonic_sdk.worlds.image import ImageWorld

    task = ImageWorld(train_per_class=2, test_per_class=2).task("amber_shapes")
    return clip, tuned, task.grid(per_class=2, seed=0)


def test_misspelt_keywords_are_refused_by_name(tiny):
    """The issue's cases: a misspelt keyword is a TypeError naming it, not silently stored or dropped."""
    pre, ft, grid = tiny
    with pytest.raises(TypeError, match="'spcae'"):
        ps.UTD.compute(pre, ft, grid, spcae="affinity")
    utd = ps.UTD.compute(pre, ft, grid, space="affinity")
    bank = ps.OperatorBank(pre)
    bank.add_grid(grid)
    with pytest.raises(TypeError, match="'alpha'"):
        bank.edit(utd, alpha=0.7)
    with pytest.raises(TypeError, match="'anchor'"):
        bank.edit(utd, anchor=[grid])
    from platonic_sdk.evaluate import FeatureCache
    from platonic_sdk.finetune import TaskVector

    with pytest.raises(TypeError, match="'tsk'"):
        TaskVector.from_models(pre.model, ft.model, tsk="amber_shapes")
    with pytest.raises(TypeError, match="'batchsize'"):
        FeatureCache.build(pre, grid.items[:2], [0, 1], batchsize=2)


def test_free_metadata_goes_in_one_dict(tiny, tmp_path):
    """What a user records goes in the explicit dict and comes back from the file."""
    pre, ft, grid = tiny
    from platonic_sdk.evaluate import FeatureCache
    from platonic_sdk.finetune import TaskVector

    tau = TaskVector.from_models(pre.model, ft.model, metadata={"task": "amber_shapes"})
    assert tau.norm() > 0
    tau.save(tmp_path / "tau.safetensors")
    assert TaskVector.load(tmp_path / "tau.safetensors").metadata == {"task": "amber_shapes"}
    cache = FeatureCache.build(pre, grid.items[:2], [0, 1], batch_size=2, cache=False, meta={"note": "two probes"})
    cache.save(tmp_path / "cache.safetensors")
    meta = FeatureCache.load(tmp_path / "cache.safetensors").meta
    assert meta["note"] == "two probes" and meta["family"] == "clip"


def test_pass_throughs_refuse_unknown_names():
    """The listed pass-throughs still refuse a name their receiver does not take."""
    for family in ("clip", "lit"):
        with pytest.raises(TypeError, match="'sede'"):
            ps.from_config(family, sede=0)
    with pytest.raises(TypeError, match="'amodle'"):  # the laion options of a CLAP checkpoint, misspelt
        ps.load("clap-general", "no/such/folder", amodle="HTSAT-base")
    from platonic_sdk.finetune import TaskVector, merge

    tau = TaskVector({"w": torch.ones(2)})
    with pytest.raises(ps.PlatonicError, match="takes"):
        merge([tau, tau], "ties", densty=0.2)
