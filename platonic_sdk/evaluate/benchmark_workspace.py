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
from typing import Any, Callable, Mapping

from ..data.benchmark import LoadedBenchmark
from ..distributed import map_sharded
from ..errors import PlatonicError
from ..finetune.source import FinetuneConfig, FineTuned, finetune
from ..protocol import DualEncoder
from ..tasks import Task
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


def benchmark_workspace(
    loaded: LoadedBenchmark,
    models: Mapping[str, DualEncoder],
    finetunes: str | os.PathLike,
    recipe: Callable[[str], FinetuneConfig],
    progress: bool = False,
    **options: Any,
) -> Workspace:
    """Workspace of `models` on the benchmark's tasks, with every (family, task) fine-tune from `finetunes`;
    the missing ones are made there first with `recipe(family)` (under torchrun, dealt over the ranks).
    `options` go to Workspace (ridges, per_class, ...)."""
    if not models:
        raise PlatonicError(f"benchmark {loaded.benchmark.name}: no families to run")
    pairs = [(family, entry.name) for family in models for entry in loaded.benchmark.tasks]
    recipes = {family: recipe(family) for family in models}
    missing = [(f, t) for f, t in pairs if not finetune_file(finetunes, f, t).is_file()]
    map_sharded(lambda ft: make_finetune(models[ft[0]], loaded.tasks[ft[1]], finetune_file(finetunes, *ft), recipes[ft[0]], progress),
                missing, label=lambda _, ft: f"fine-tuning {ft[0]} on {ft[1]!r}")
    finetuned = {(f, t): read_finetune(models[f], loaded.tasks[t], finetune_file(finetunes, f, t), recipes[f]) for f, t in pairs}
    return Workspace(models, loaded.tasks, finetuned, loaded.controls, progress=progress, **options)
