"""An app that composes two task edits into its deployed model and ships the edit.

The deployed model (the target) was never fine-tuned. Another family (the source) was fine-tuned
on two tasks; their Universal Task Descriptors move to the target through closed-form operators,
summed into one edit folded into the target's last affine map:

    python examples/compose_two_tasks_app.py            # the shipped image-world zoo (siglip <- clip)
    python examples/compose_two_tasks_app.py --ci       # tiny random models, seconds

Writes OUT/descriptors/*.safetensors, OUT/edit.safetensors and OUT/edited_model/ (a checkpoint of
the deployed family with the edit folded in).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import platonic_sdk as ps  # noqa: E402
from platonic_sdk.evaluate import accuracy  # noqa: E402
from platonic_sdk.evaluate.plan.settings import CellSettings, default  # noqa: E402
from platonic_sdk.worlds.image import ImageWorld  # noqa: E402
from platonic_sdk.worlds.registry import world_spec  # noqa: E402

TASKS = ImageWorld().trio[:2]  # two related tasks of the world (amber-tinted shapes and glyphs)
CONTROL = ImageWorld().controls[0]


def shipped_models(source: str, target: str):
    """(deployed target, source pretrained, {task: source fine-tuned}) from the image world's zoo."""
    from platonic_sdk.worlds import zoo

    models = zoo.load_models(names=[source, target])
    finetuned = zoo.load_finetunes({source: models[source]}, TASKS)
    return models[target], models[source], {task: finetuned[(source, task)] for task in TASKS}


def tiny_models(world: ImageWorld):
    """Tiny random models; the source is fine-tuned for two steps on each task (enough to move it)."""
    from platonic_sdk.finetune import FinetuneConfig, finetune

    target, source = ps.from_config("siglip", seed=1), ps.from_config("clip", seed=0)
    config = FinetuneConfig(max_steps=2, lr=1e-3, batch_size=16)
    return target, source, {t: finetune(source, world.task(t), config, progress=False).encoder for t in TASKS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ci", action="store_true", help="tiny random models and a tiny world (seconds)")
    parser.add_argument("--out", default="out/compose_app", help="output folder")
    parser.add_argument("--strength", type=float, default=default(CellSettings, "addition_strength"), help="strength of the folded edit (paper: 0.5)")
    args = parser.parse_args()
    out = Path(args.out)

    world = ImageWorld(train_per_class=4, test_per_class=3) if args.ci else ImageWorld()
    target, source, finetuned = tiny_models(world) if args.ci else shipped_models("clip", "siglip")
    per_class = 2 if args.ci else 30

    # 1. descriptors on each task's grid (probes from the train split, prompts from the class names)
    grids = {t: world.task(t).grid(per_class=per_class, seed=0) for t in TASKS}
    utds = {t: ps.UTD.compute(source, finetuned[t], grids[t], provenance={"source": "clip fine-tune"}) for t in TASKS}
    for t, utd in utds.items():
        utd.save(out / "descriptors" / f"{t}.safetensors")  # shareable: no model needed to read them

    # 2. the deployed model's operators: one ridge factorisation per grid, then one product per descriptor
    image = world_spec("image").settings()  # the image world's tuned ridges (its tiny text towers need larger ones than the paper's)
    bank = ps.OperatorBank(target, image.ridge_a, image.ridge_b)
    for grid in grids.values():
        bank.add_grid(grid)
    edit = bank.edit(utds[TASKS[0]] + utds[TASKS[1]], strength=args.strength)

    # 3. what the edit does: both tasks up, the control set (mostly) untouched
    names = [*TASKS, CONTROL]
    before = {n: accuracy(target, world.task(n)) for n in names}
    with edit.applied_to(target):
        after = {n: accuracy(target, world.task(n)) for n in names}
    print(f"{'task':<16} {'deployed':>9} {'edited':>9}")
    for n in names:
        print(f"{n:<16} {before[n]:>9.2f} {after[n]:>9.2f}")
    # the fit on the probe grids, L(E) of docs/method.md sec. 3 (sum over grids of ||UTD[E] - U||^2 / M): it moves at any size
    composition = utds[TASKS[0]] + utds[TASKS[1]]
    unedited = composition.objective({gid: 0 * u for gid, (_, u) in composition.by_grid().items()})
    print(f"transfer loss on the probe grids: {unedited:.4g} unedited -> {bank.objective(composition, edit.operator, args.strength):.4g} edited")
    if args.ci:
        print("(--ci: two random tiny models fine-tuned for two steps share no structure that the edit could carry into "
              f"accuracy on {len(world.task(TASKS[0]).test.labels)} test items per task; the loss above shows the solve acts)")

    # 4. ship it: the edit file (a few kB), and a checkpoint with the edit folded in
    edit.save(out / "edit.safetensors")
    edit.apply(target)
    target.save(str(out / "edited_model"))
    edit.remove()  # the in-memory model is restored bit for bit
    assert accuracy(target, world.task(TASKS[0])) == before[TASKS[0]]
    reloaded = ps.Edit.load(out / "edit.safetensors")
    print(f"saved {reloaded!r} to {out / 'edit.safetensors'} and the edited checkpoint to {out / 'edited_model'}")


if __name__ == "__main__":
    main()
