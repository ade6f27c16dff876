"""A loaded benchmark as a Workspace: the families' pretrained models, their source fine-tunes on every
task, and the benchmark's controls and held-out set (evaluation only).

Fine-tunes live in one folder as `<family>/<task>.safetensors` task vectors (what `platonic finetune -o`
writes). A missing one is made once with the family's recipe (docs/method.md sec. 6) and saved there (under
torchrun the missing ones are dealt over the ranks); every run then reads the files, so a rerun resumes on the same weights. A file made with another recipe or
on other train data (file stamps) is refused, naming it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import attrs

from ...data.benchmark import Benchmark, benchmark, load_benchmark
from ...encoding.distributed import map_sharded
from ...errors import PlatonicError
from ...finetune.source import FinetuneConfig, FineTuned, finetune
from ...protocol.encoder import DualEncoder
from ...registry import load
from ...tasks import Task
from ...worlds.zoo import zoo_recipe
from .workspace import Workspace


def finetune_file(folder: str | os.PathLike, family: str, task: str) -> Path:
    return Path(folder) / family / f"{task}.safetensors"


def train_stamp(task: Task) -> str:
    """sha256 (16 hex) of the train items' stamps (path, size, modification time): cheap, and changes with the data."""
    refs = getattr(task.train.items, "refs", None)
    if refs is None:  # in-memory items: their content
        return task.train.content[:16]
    return hashlib.sha256("\n".join(r.stamp() for r in refs).encode()).hexdigest()[:16]


def _as_json(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True))


def make_finetune(pre: DualEncoder, task: Task, path: Path, recipe: FinetuneConfig, progress: bool = False) -> None:
    """Fine-tune `pre` on `task` with `recipe` and save it to `path` (with the train data's stamp)."""
    tuned = finetune(pre, task, recipe, progress=progress)
    if not tuned.task_vector.deltas:
        raise PlatonicError(f"fine-tuning {pre.family} on {task.name!r} changed no weight (losses {list(tuned.losses)[:3]}): "
                            "are its class prompts indistinguishable to this model?")
    tuned.task_vector.metadata["train_stamp"] = train_stamp(task)
    path.parent.mkdir(parents=True, exist_ok=True)
    tuned.save(path)


def read_finetune(pre: DualEncoder, task: Task, path: Path, recipe: FinetuneConfig) -> DualEncoder:
    """The fine-tune saved at `path`, refused unless made from `pre`'s family on `task`'s train data with `recipe`."""
    loaded = FineTuned.load(path, pre)
    meta = loaded.metadata
    problems = [f"{k} {meta.get(k)!r} (this run: {v!r})" for k, v in _as_json(recipe.describe()).items() if _as_json(meta.get(k)) != v]
    problems += [f"task {meta.get('task')!r}"] if meta.get("task") != task.name else []
    problems += ["other train data (file stamps)"] if meta.get("train_stamp") != train_stamp(task) else []
    if problems:
        raise PlatonicError(f"fine-tune {path} is not {pre.family}'s on this run's {task.name!r}: it was made with "
                            f"{'; '.join(problems)}; delete it to fine-tune again, or repeat the options it was made with")
    return loaded.encoder.eval()


def source_recipe(checkpoint: str | None, overrides: Mapping[str, Any], seed: int) -> tuple[FinetuneConfig, str]:
    """(FinetuneConfig, where its defaults came from) of a source fine-tune: the zoo's own recipe when `checkpoint`
    is a member folder of a built zoo (its manifest records it), else the library's; `overrides` (FinetuneConfig
    fields) win."""
    found = zoo_recipe(checkpoint)
    base, origin = (found[0], f"the zoo's recipe ({found[1]})") if found else ({}, "the library's defaults")
    unknown = sorted(set(overrides) - {f.name for f in attrs.fields(FinetuneConfig)} | ({"seed"} & set(overrides)))
    if unknown:
        raise PlatonicError(f"unknown fine-tuning recipe field(s) {unknown}; FinetuneConfig takes "
                            f"{', '.join(f.name for f in attrs.fields(FinetuneConfig) if f.name != 'seed')}")
    return FinetuneConfig(**{**base, **overrides, "seed": seed}), origin


def _python_words(key: str) -> str:
    return key


def benchmark_workspace(
    name: str | Benchmark,
    data_root: str | os.PathLike,
    *,
    finetunes: str | os.PathLike,
    families: Sequence[str] | None = None,
    checkpoints: Mapping[str, str] | None = None,
    recipe: Mapping[str, Any] | None = None,
    seed: int = 0,
    test_fraction: float = 0.2,
    device: str | None = None,
    dry: bool = False,
    progress: bool = False,
    per_class: int = 30,
    grid_seed: int = 0,
    batch_size: int = 64,
    ridge_a: float | None = None,
    ridge_b: float | None = None,
    say: Callable[[str], str] = _python_words,
) -> tuple[Workspace, dict[str, Any]]:
    """(Workspace, description) of a registered benchmark: its datasets under `data_root` (every missing one
    named before any model loads), `families` (default: the benchmark's) from `checkpoints` (default: each
    family's reference), and every (family, task) fine-tune from the folder `finetunes`, the missing ones made
    there first with the family's recipe (`source_recipe`, `recipe` overriding; under torchrun dealt over the
    ranks). `dry`: the fine-tunes are neither made nor read (the workspace holds their names only) and the
    description counts those to make. Ridges left at None are the library's; `say` names a setting as the
    caller's user writes it (the CLI: its flag)."""
    bench = benchmark(name) if isinstance(name, str) else name
    families = list(families or bench.families)
    checkpoints = dict(checkpoints or {})
    allowed = list(dict.fromkeys([*bench.families, *families]))
    strange = [f for f in checkpoints if f not in allowed]
    if strange:
        raise PlatonicError(f"{say('checkpoints')}: {strange[0]!r} is not among the benchmark's families ({', '.join(allowed)})")
    loaded = load_benchmark(bench, data_root, seed=seed, test_fraction=test_fraction)
    models = {family: _load(family, checkpoints.get(family), device, say) for family in families}
    recipes = {f: source_recipe(checkpoints.get(f), recipe or {}, seed) for f in families}
    ridges = {k: v for k, v in (("ridge_a", ridge_a), ("ridge_b", ridge_b)) if v is not None}  # else the library's
    options = dict(per_class=per_class, grid_seed=grid_seed, batch_size=batch_size, progress=progress, **ridges)
    pairs = [(f, t.name) for f in families for t in bench.tasks]
    missing = [(f, t) for f, t in pairs if not finetune_file(finetunes, f, t).is_file()]
    describe: dict[str, Any] = {}
    if dry:
        ws = Workspace(models, loaded.tasks, dict.fromkeys(pairs), loaded.controls, **options)  # fine-tunes by name only
        per_family = {f: [t for g, t in missing if g == f] for f in families}
        describe["finetunes to make"] = f"{len(missing)} of {len(pairs)}" + (
            f" ({'; '.join(f'{f}: {len(ts)} tasks' for f, ts in per_family.items() if ts)}; "
            f"{sum(len(loaded.tasks[t].train) for _, t in missing)} train items in all)" if missing else "")
    else:
        map_sharded(lambda ft: make_finetune(models[ft[0]], loaded.tasks[ft[1]], finetune_file(finetunes, *ft), recipes[ft[0]][0], progress),
                    missing, label=lambda _, ft: f"fine-tuning {ft[0]} on {ft[1]!r}")
        finetuned = {(f, t): read_finetune(models[f], loaded.tasks[t], finetune_file(finetunes, f, t), recipes[f][0]) for f, t in pairs}
        ws = Workspace(models, loaded.tasks, finetuned, loaded.controls, **options)
    describe.update({
        "benchmark": f"{bench.name}: {bench.description}", "benchmark data": os.path.abspath(data_root),
        "checkpoints": {f: models[f].checkpoint for f in families}, "finetunes": str(Path(finetunes).resolve()),
        "finetune recipe": {f: origin for f, (_, origin) in recipes.items()},
    })
    return ws, describe


def _load(family: str, checkpoint: str | None, device: str | None, say: Callable[[str], str]) -> DualEncoder:
    try:
        model = load(family, checkpoint)
    except (OSError, ValueError) as exc:  # a hub id without network, a folder that is not a checkpoint
        raise PlatonicError(f"cannot load {family} from {checkpoint or 'its reference checkpoint'} "
                            f"({' '.join(str(exc).split()).rstrip('.')}); give the path of a local checkpoint of {family} "
                            f"in {say('checkpoints')}") from None
    return (model.to(device) if device else model).eval()
