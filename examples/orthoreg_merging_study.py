"""OrthoReg and weight-space merging: fine-tune one model on several tasks without and with OrthoReg,
merge the task vectors by every registered merging method (task arithmetic, TIES, DARE, TSV-M, Iso-C)
and negate each task by every method against a control set, pick each strength on validation, and print the tables.

    python examples/orthoreg_merging_study.py                # clip of the shipped image zoo, 3 tasks
    python examples/orthoreg_merging_study.py --ci           # a tiny random CLIP, two tasks, seconds
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import platonic_sdk as ps  # noqa: E402
from platonic_sdk.evaluate.measure.merging import orthoreg_comparison  # noqa: E402
from platonic_sdk.evaluate.report.render import orthoreg_section  # noqa: E402
from platonic_sdk.finetune import FinetuneConfig  # noqa: E402
from platonic_sdk.worlds import zoo  # noqa: E402
from platonic_sdk.worlds.image import ImageWorld  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ci", action="store_true", help="a tiny random CLIP on a tiny world (seconds)")
    parser.add_argument("--member", default="clip", help="zoo member to fine-tune (clip)")
    parser.add_argument("--tasks", type=int, default=3, help="how many of the world's transfer tasks (3)")
    parser.add_argument("--out", default="out/orthoreg_study", help="output folder (study.json, study.md)")
    args = parser.parse_args()

    if args.ci:
        world, encoder = ImageWorld(train_per_class=8, test_per_class=4), ps.from_config("clip", seed=0)
        recipe = FinetuneConfig(lr=1e-2, max_steps=4, batch_size=16)
    else:
        world, encoder = ImageWorld(seed=0), zoo.member(args.member)
        recipe = FinetuneConfig(**zoo.read_manifest()["finetune"])  # the recipe of the zoo's own fine-tunes
    tasks = [world.task(t) for t in world.transfer_tasks[: 2 if args.ci else args.tasks]]
    study = orthoreg_comparison(args.member, encoder, tasks, recipe, progress=True, control=world.task(world.controls[0]))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "study.json").write_text(json.dumps(study, indent=1))
    text = orthoreg_section(study)
    (out / "study.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
