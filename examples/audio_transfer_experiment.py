"""Audio-text transfer: compose two audio tasks across CLAP families and test a held-out third.

The paper's audio study: several audio-text models of different widths and depths, two tasks
composed, a third related dataset held out. Here on the built-in audio world (synthetic clips):
every cross-family cell, the strength sweep, accumulation, the guarantee diagnostic, descriptor
similarity and held-out transfer, gathered in OUT/report.md with figures.

    python examples/audio_transfer_experiment.py         # the shipped audio zoo (four CLAP families)
    python examples/audio_transfer_experiment.py --ci    # two tiny random CLAP models, seconds
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import platonic_sdk as ps  # noqa: E402
from platonic_sdk.evaluate.experiment import ExperimentConfig, run_experiment  # noqa: E402
from platonic_sdk.evaluate.workspace import Workspace  # noqa: E402
from platonic_sdk.worlds.audio import AudioWorld  # noqa: E402


def shipped(world: AudioWorld, tasks: list[str]):
    """The audio zoo's pretrained CLAP members and their shipped fine-tunes on `tasks`."""
    from platonic_sdk.worlds import zoo
    from platonic_sdk.worlds.audio import AUDIO_ZOO_DIR

    models = zoo.load_models(AUDIO_ZOO_DIR)
    return models, zoo.load_finetunes(models, tasks, AUDIO_ZOO_DIR)


def tiny(world: AudioWorld, tasks: list[str]):
    """Two tiny random CLAP families, each fine-tuned for two steps on each task."""
    from platonic_sdk.finetune import FinetuneConfig, finetune

    models = {name: ps.from_config(name, seed=i) for i, name in enumerate(("clap-htsat-unfused", "clap-general"))}
    config = FinetuneConfig(max_steps=2, lr=1e-3, batch_size=8)
    finetuned = {(m, t): finetune(models[m], world.task(t), config, progress=False).encoder for m in models for t in tasks}
    return models, finetuned


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ci", action="store_true", help="tiny random models and a tiny world (seconds)")
    parser.add_argument("--out", default="out/audio_experiment", help="output folder (report.md, figures/)")
    parser.add_argument("--alpha", type=float, default=0.5, help="addition strength")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: the study is many small products)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)

    world = AudioWorld(train_per_class=3, test_per_class=2) if args.ci else AudioWorld()
    related, held_out = list(world.trio[:2]), world.trio[2]
    tasks = related if args.ci else list(world.transfer_tasks)
    models, finetuned = tiny(world, tasks) if args.ci else shipped(world, tasks)
    everything = {n: world.task(n) for n in dict.fromkeys([*tasks, held_out, *world.controls])}
    ws = Workspace(models, everything, finetuned, world.controls, per_class=2 if args.ci else 30, ridge_b=0.1,
                   batch_size=16 if args.ci else 64)
    config = ExperimentConfig(alpha=args.alpha, held_out=(*related, held_out),
                              sweep_alphas=(0.0, 0.5, 1.0) if args.ci else ExperimentConfig().sweep_alphas)
    summary = run_experiment(ws, args.out, config, {"world": "audio", "seed": world.seed, "example": "audio_transfer_experiment"})
    print(f"{summary['cells']} cells over {', '.join(models)}; report: {summary['report']}")


if __name__ == "__main__":
    main()
