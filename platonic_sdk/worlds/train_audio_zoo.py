"""Rebuild the audio world's zoo: tokenizer, four pretrained CLAP members, source fine-tunes, manifest.

    python -m platonic_sdk.worlds.train_audio_zoo [--out DIR] [--members NAME ...] [--steps N] [--tasks T ...]

Members and recipes come from worlds/audio.py (`AUDIO_ZOO`, `AUDIO_PRETRAIN`, `AUDIO_FINETUNE`,
`AUDIO_CORPUS_SIZE`; world seed 0); weights ship in fp16, fine-tunes as fp16 media-tower task vectors.
"""

from __future__ import annotations

import argparse
import json
import copy
import shutil
import time
from pathlib import Path
from typing import Any, Sequence

import attrs
import torch

from .audio import AUDIO_CORPUS_SIZE, AUDIO_FINETUNE, AUDIO_PRETRAIN, AUDIO_ZOO, AUDIO_ZOO_DIR, AudioWorld
from .train_zoo import _update_manifest, world_tokenizer, zero_shot
from .zoo import MANIFEST, finetune_path


def finetune_tasks(encoder: Any, name: str, world: AudioWorld, root: Path, tasks: Sequence[str]) -> dict[str, dict[str, float]]:
    """Fine-tune `encoder` on each task with AUDIO_FINETUNE; save fp16 task vectors; return accuracies."""
    from ..finetune.source import FinetuneConfig, finetune
    from ..finetune.weightspace import TaskVector

    record = {}
    for task_name in tasks:
        task = world.task(task_name)
        ft = finetune(encoder, task, FinetuneConfig(**AUDIO_FINETUNE), progress=False)
        TaskVector({k: v.half() for k, v in ft.task_vector.deltas.items()}, ft.task_vector.metadata).save(
            finetune_path(root, name, task_name))
        record[task_name] = {"zero_shot": zero_shot(encoder, task), "finetuned": zero_shot(ft.encoder, task)}
        print(f"  {name} {task_name}: zero-shot {record[task_name]['zero_shot']:.1f}, "
              f"fine-tuned {record[task_name]['finetuned']:.1f}", flush=True)
    return record


def build(out: Path, names: Sequence[str], steps: int | None = None, corpus_size: int = AUDIO_CORPUS_SIZE,
          tasks: Sequence[str] | None = None, pretrain_members: bool = True, progress: bool = True) -> None:
    """Pretrain (unless `pretrain_members` is False), save in fp16 and fine-tune the named members into `out`."""
    from .. import from_config, load
    from .pretrain import pretrain

    specs = {m.name: m for m in AUDIO_ZOO}
    world = AudioWorld(seed=0)
    manifest = out / MANIFEST
    config = attrs.evolve(AUDIO_PRETRAIN, **({"steps": steps} if steps else {}))
    out.mkdir(parents=True, exist_ok=True)
    _update_manifest(manifest, None, {}, world="audio", world_seed=world.seed, corpus_size=corpus_size,
                     finetune=AUDIO_FINETUNE, pretrain=attrs.asdict(config))
    if pretrain_members:
        clips, captions = world.corpus(corpus_size)
        tokenizer = world_tokenizer(world, captions)
    for name in names:
        spec = specs[name]
        if pretrain_members:
            started = time.perf_counter()
            encoder = from_config(spec.family, dict(spec.config), tokenizer=tokenizer, seed=spec.seed)
            losses = pretrain(encoder, clips, captions, attrs.evolve(config, lr=spec.lr, seed=spec.seed), progress=progress)
            seconds = time.perf_counter() - started
            shutil.rmtree(out / name, ignore_errors=True)
            half = copy.deepcopy(encoder)
            half.model.to(torch.float16)
            half.save(str(out / name))
            final = float(sum(losses[-50:]) / len(losses[-50:]))
            print(f"{name}: pretrained in {seconds:.0f} s, final loss {final:.3f}", flush=True)
            _update_manifest(manifest, name, {
                "family": spec.family, "config": dict(spec.config), "loss": spec.loss, "seed": spec.seed,
                "embed_dim": encoder.embed_dim, "params": sum(p.numel() for p in encoder.model.parameters()),
                "pretrain_seconds": round(seconds, 1), "final_loss": final, "steps": len(losses),
            })
        encoder = load(spec.family, str(out / name)).eval()
        accs = finetune_tasks(encoder, name, world, out, tasks or world.transfer_tasks)
        for control in world.controls:
            accs[control] = {"zero_shot": zero_shot(encoder, world.task(control))}
        old = json.loads(manifest.read_text())["members"].get(name, {}).get("accuracy", {})
        _update_manifest(manifest, name, {"accuracy": {**old, **accs}})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(AUDIO_ZOO_DIR), help="zoo folder (default: the package's worlds/zoo_audio)")
    parser.add_argument("--members", nargs="+", default=[m.name for m in AUDIO_ZOO], help="members to (re)train")
    parser.add_argument("--steps", type=int, help="pretraining steps (default: AUDIO_PRETRAIN)")
    parser.add_argument("--corpus-size", type=int, default=AUDIO_CORPUS_SIZE)
    parser.add_argument("--tasks", nargs="+", help="tasks to fine-tune on (default: the world's transfer tasks)")
    parser.add_argument("--finetune-only", action="store_true", help="keep the saved members; only fine-tune")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    build(Path(args.out), args.members, args.steps, args.corpus_size, args.tasks, not args.finetune_only,
          progress=not args.quiet)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
