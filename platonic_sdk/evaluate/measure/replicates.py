"""Replicates of a world: the seeds a method is chosen and confirmed on (docs/method.md sec. 15.1).

A replicate redraws everything a seed can redraw, with probes held out of the sources' fine-tunes:

- a synthetic world at world seed `seed`: new items for every split (probes, test and controls), the zoo's
  members and fine-tunes (made on world seed 0, so the probes are out of sample);
- the real world, whose images are shipped: the seed redraws which garments are train and which test
  (`RealWorld.resplit`), the probes are a seeded `probes_per_class` of each class's train pool, and every
  source is fine-tuned anew (the zoo's recipe) on the rest of that pool, so the fine-tunes never saw a probe
  or a test item.
"""

from __future__ import annotations

from typing import Any

import attrs

from ...progress import progress as progress_bar
from ...tasks import Split, Task, item_fingerprint
from .workspace import Workspace, zoo_workspace

REAL_PROBES_PER_CLASS = 15  # of the real world's 30 train items per class; the sources fine-tune on the other 15


def replicate_workspace(world: str, seed: int, *, probes_per_class: int = REAL_PROBES_PER_CLASS, progress: bool = False,
                        batch_size: int = 64) -> tuple[Workspace, dict[str, Any]]:
    """A registered world's replicate `seed` as a Workspace, with a description (zoo_workspace's, plus how it was drawn)."""
    if world != "real":
        ws, describe = zoo_workspace(world, seed=seed, progress=progress, batch_size=batch_size)
        return ws, {**describe, "replicate": f"world seed {seed}: new items, the zoo's fine-tunes (world seed 0)"}
    return _real_replicate(seed, probes_per_class, progress, batch_size)


def _real_replicate(seed: int, probes_per_class: int, progress: bool, batch_size: int) -> tuple[Workspace, dict[str, Any]]:
    from ...finetune import FinetuneConfig, finetune
    from ...worlds import zoo
    from ...worlds.real import RealWorld
    from ...worlds.registry import world_spec

    spec = world_spec("real")
    probed, whole = RealWorld(seed=seed, train_per_class=probes_per_class, resplit=True), RealWorld(seed=seed, resplit=True)
    models = zoo.load_models(spec.zoo)
    names = list(probed.transfer_tasks)
    tasks = {n: probed.task(n) for n in dict.fromkeys([*names, probed.trio[2], *probed.controls])}
    recipe = FinetuneConfig(**zoo.read_manifest(spec.zoo)["finetune"], seed=seed)
    rest = {n: _without(whole.task(n), {item_fingerprint(x) for x in tasks[n].train.items}) for n in names}
    pairs = [(m, n) for n in names for m in models]
    finetuned = {(m, n): finetune(models[m], rest[n], recipe, progress=False).encoder
                 for m, n in progress_bar(pairs, desc=f"real replicate {seed}: fine-tunes off the probes", disable=not progress)}
    tuned = spec.settings()  # the world's ridges, from its zoo's manifest
    ws = Workspace(models, tasks, finetuned, list(probed.controls), ridge_a=tuned.ridge_a, ridge_b=tuned.ridge_b,
                   batch_size=batch_size, progress=progress)
    describe = {
        "world": f"real, replicate {seed} ({len(names)} transfer tasks, held-out trio {' + '.join(probed.trio[:2])} -> {probed.trio[2]})",
        "zoo": ", ".join(models), "world_seed": seed, "train_per_class": probes_per_class, "test_per_class": probed.test_per_class,
        "replicate": f"garments' train/test redrawn by seed {seed}; {probes_per_class} probes per class; sources fine-tuned anew "
                     "on the rest of the train pool",
    }
    return ws, describe


def _without(task: Task, fingerprints: set[str]) -> Task:
    """`task` whose train split drops the items with these fingerprints."""
    keep = [i for i, x in enumerate(task.train.items) if item_fingerprint(x) not in fingerprints]
    return attrs.evolve(task, train=Split([task.train.items[i] for i in keep], task.train.labels[keep]))
