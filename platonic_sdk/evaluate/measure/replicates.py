"""Replicates of a world: the seeds a method is chosen and confirmed on (docs/method.md sec. 15.1), and what
`platonic grid --world-seed` draws.

A replicate redraws everything a seed can redraw, with probes held out of the sources' fine-tunes:

- a synthetic world at world seed `seed`: new items for every split (probes, test and controls), the zoo's
  members and fine-tunes (made on world seed 0, so the probes are out of sample);
- a world of shipped items (`real`, `real_audio`: its class sets `replicate_probes`): the seed redraws which items
  are train and which test (the world's `resplit`), the probes are a seeded `train_per_class` (default: the world's
  `replicate_probes`, 15 on the real world, 10 on real_audio) of each class's train pool, and every source is
  fine-tuned anew (the zoo's recipe) on the rest of that pool, so the fine-tunes never saw a probe or a test item; a
  task's labelled keep set (Workspace.keep_set: experiments that keep labels) is its whole train pool.
  Its seed 0 is the world as shipped, with the zoo's own fine-tunes (zoo_workspace), as every world's seed 0 is.
"""

from __future__ import annotations

from typing import Any, Sequence

import attrs
import numpy as np

from ...errors import PlatonicError
from ...progress import progress as progress_bar
from ...tasks import Split, Task, item_fingerprint
from ...worlds.registry import world_spec
from .workspace import Workspace, zoo_workspace


def replicate_workspace(world: str, seed: int, *, families: Sequence[str] | None = None, tasks: Sequence[str] | None = None,
                        controls: Sequence[str] | None = None, ridge_a: float | None = None, ridge_b: float | None = None,
                        device: str | None = None, train_per_class: int | None = None, test_per_class: int | None = None,
                        progress: bool = False, **options: Any) -> tuple[Workspace, dict[str, Any]]:
    """A registered world's replicate `seed` as a Workspace, with a description; the keywords are zoo_workspace's
    (`options`: Workspace's per_class, grid_seed, batch_size). The seeds from 1 of a world of shipped items are drawn
    anew (the module's docstring; `train_per_class`: the probes' pool per class); every other world and seed is
    zoo_workspace's."""
    chosen = dict(families=families, tasks=tasks, controls=controls, ridge_a=ridge_a, ridge_b=ridge_b, device=device,
                  test_per_class=test_per_class, progress=progress, **options)
    probes = getattr(world_spec(world).make, "replicate_probes", None)
    if probes is None or seed == 0:
        return zoo_workspace(world, seed=seed, train_per_class=train_per_class, **chosen)
    return _drawn_replicate(world, seed, probes if train_per_class is None else train_per_class, **chosen)


def _drawn_replicate(world: str, seed: int, probes_per_class: int, *, families: Sequence[str] | None, tasks: Sequence[str] | None,
                     controls: Sequence[str] | None, ridge_a: float | None, ridge_b: float | None, device: str | None,
                     test_per_class: int | None, progress: bool, **options: Any) -> tuple[Workspace, dict[str, Any]]:
    from ...finetune import FinetuneConfig, finetune
    from ...worlds import zoo

    spec = world_spec(world)
    sizes = {} if test_per_class is None else {"test_per_class": test_per_class}
    whole = spec.make(seed=seed, resplit=True, **sizes)
    names = list(tasks or whole.transfer_tasks)
    pool = min(int(np.bincount(whole.task(n).train.labels).min()) for n in names)  # the smallest train pool of a class
    if not 0 < probes_per_class < pool:
        raise PlatonicError(f"the {world} world's replicate {seed} fine-tunes its sources on the train items its probes leave: "
                            f"train_per_class must lie in 1..{pool - 1}, got {probes_per_class}")
    probed = spec.make(seed=seed, train_per_class=probes_per_class, resplit=True, **sizes)
    tuned = spec.settings()  # the world's ridges and controls, from its zoo's manifest
    models = zoo.load_models(spec.zoo, names=families, device=device)
    kept = list(controls or tuned.controls)
    made = {n: probed.task(n) for n in dict.fromkeys([*names, probed.trio[2], *kept])}
    recipe = FinetuneConfig(**zoo.read_manifest(spec.zoo)["finetune"], seed=seed)
    rest = {n: _without(whole.task(n), {item_fingerprint(x) for x in made[n].train.items}) for n in names}
    pairs = [(m, n) for n in names for m in models]
    finetuned = {(m, n): finetune(models[m], rest[n], recipe, progress=False).encoder
                 for m, n in progress_bar(pairs, desc=f"{world} replicate {seed}: fine-tunes off the probes", disable=not progress)}
    pools = {n: whole.task(n).train for n in made if n in whole.task_names}  # what a user holds to keep a task: its whole train pool
    ws = Workspace(models, made, finetuned, kept, ridge_a=tuned.ridge_a if ridge_a is None else ridge_a,
                   ridge_b=tuned.ridge_b if ridge_b is None else ridge_b, keep_splits=pools, progress=progress, **options)
    describe = {
        "world": f"{world}, replicate {seed} ({len(names)} transfer tasks, held-out trio {' + '.join(probed.trio[:2])} -> {probed.trio[2]})",
        "zoo": ", ".join(models), "world_seed": seed, "train_per_class": probes_per_class, "test_per_class": probed.test_per_class,
        "replicate": f"{probed.resplit_items} train/test redrawn by seed {seed}; {probes_per_class} probes per class; sources "
                     "fine-tuned anew on the rest of the train pool",
    }
    return ws, describe


def _without(task: Task, fingerprints: set[str]) -> Task:
    """`task` whose train split drops the items with these fingerprints."""
    keep = [i for i, x in enumerate(task.train.items) if item_fingerprint(x) not in fingerprints]
    return attrs.evolve(task, train=Split([task.train.items[i] for i in keep], task.train.labels[keep]))
