"""Rebuild the image world's zoo: tokenizer, pretrained members, source fine-tunes, manifest.

    python -m platonic_sdk.worlds.train_zoo [--out DIR] [--members clip siglip ...] [--steps N]

Pretraining uses `ZOO` and `PRETRAIN` from zoo.py on `CORPUS_SIZE` captions of world seed 0; each
member is fine-tuned on every transfer task with rank-4 LoRA (METHOD sec. 6, learning rate raised
for models trained from scratch) and its media-tower task vector is stored in fp16.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, Sequence

import attrs
import torch

from .zoo import CORPUS_SIZE, MANIFEST, PRETRAIN, ZOO, ZOO_DIR, ZooMember, finetune_path, member

# Rank-4 LoRA on q/v (METHOD sec. 6) with a higher lr and more epochs for models trained from scratch.
# The CE's temperature is CLIP's initial 1/0.07 (the pretraining loop's start; the loop does not keep
# the learned one), not the 100 of a converged CLIP: at 100 the tiny models fit each task with small
# cosine changes, and their descriptors (and every transfer) shrink accordingly.
FINETUNE = dict(rank=4, lora_alpha=8.0, epochs=10, lr=5e-3, batch_size=32, weight_decay=0.01, logit_scale=1 / 0.07)


def world_tokenizer(world: Any, captions: Sequence[str]):
    """A word-level tokenizer of the corpus captions and every task prompt (context 16)."""
    from ..adapters._text import train_tokenizer

    prompts = [p for name in world.task_names for cls in world.task(name).prompts() for p in cls]
    return train_tokenizer(list(captions) + prompts, vocab_size=400, max_length=16)


def zero_shot(encoder: Any, task: Any) -> float:
    from ..evaluate.zeroshot import accuracy

    return float(accuracy(encoder, task))


def train_member(spec: ZooMember, images: Any, captions: Sequence[str], tokenizer: Any, steps: int | None, progress: bool):
    """A fresh member built through its family adapter and pretrained with its family's loss."""
    from .. import from_config
    from .pretrain import pretrain

    encoder = from_config(spec.family, dict(spec.config), tokenizer=tokenizer, seed=spec.seed)
    config = attrs.evolve(PRETRAIN, loss=spec.loss, lr=spec.lr, seed=spec.seed, **({"steps": steps} if steps else {}))
    losses = pretrain(encoder, images, captions, config, progress=progress)
    return encoder, losses


def finetune_member(encoder: Any, name: str, world: Any, root: Path, tasks: Sequence[str], progress: bool) -> dict[str, dict[str, float]]:
    """Fine-tune `encoder` on each of `tasks`; save fp16 task vectors; return accuracies."""
    from ..finetune.source import FinetuneConfig, finetune
    from ..finetune.weightspace import TaskVector

    record = {}
    for task_name in tasks:
        task = world.task(task_name)
        ft = finetune(encoder, task, FinetuneConfig(**FINETUNE), progress=progress)
        half = TaskVector({k: v.half() for k, v in ft.task_vector.deltas.items()}, ft.task_vector.metadata)
        half.save(finetune_path(root, name, task_name))
        record[task_name] = {"zero_shot": zero_shot(encoder, task), "finetuned": zero_shot(ft.encoder, task)}
        print(f"  {name:9s} {task_name:20s} zero-shot {record[task_name]['zero_shot']:5.1f}  fine-tuned {record[task_name]['finetuned']:5.1f}", flush=True)
    return record


def _update_manifest(path: Path, name: str | None, entry: dict[str, Any], **top: Any) -> None:
    """Read-modify-write of the manifest (several build processes may share one zoo folder)."""
    manifest = json.loads(path.read_text()) if path.is_file() else {"members": {}}
    manifest.update(top)
    if name is not None:
        manifest["members"][name] = {**manifest["members"].get(name, {}), **entry}
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    os.replace(tmp, path)  # atomic: a concurrent reader never sees a half-written file


def build(out: Path, names: Sequence[str], steps: int | None = None, corpus_size: int = CORPUS_SIZE,
          stages: Sequence[str] = ("pretrain", "finetune"), tasks: Sequence[str] | None = None, progress: bool = True) -> None:
    """Pretrain and/or fine-tune the named members into `out`, recording each in the manifest."""
    from .image import ImageWorld

    world = ImageWorld(seed=0)
    manifest_path = out / MANIFEST
    out.mkdir(parents=True, exist_ok=True)
    _update_manifest(manifest_path, None, {}, world_seed=world.seed, corpus_size=corpus_size, finetune=FINETUNE)
    if "pretrain" in stages:
        t0 = time.perf_counter()
        images, captions = world.corpus(corpus_size)
        tokenizer = world_tokenizer(world, captions)
        print(f"corpus of {corpus_size} in {time.perf_counter() - t0:.1f} s; vocabulary {len(tokenizer)}", flush=True)
    for name in names:
        spec = member(name)
        if "pretrain" in stages:
            t1 = time.perf_counter()
            encoder, losses = train_member(spec, images, captions, tokenizer, steps, progress)
            folder = out / name
            shutil.rmtree(folder, ignore_errors=True)
            encoder.save(str(folder))
            seconds = time.perf_counter() - t1
            final = float(sum(losses[-50:]) / len(losses[-50:]))
            print(f"{name}: pretrained in {seconds:.0f} s, final loss {final:.3f}", flush=True)
            _update_manifest(manifest_path, name, {
                "family": spec.family, "config": dict(spec.config), "loss": spec.loss, "seed": spec.seed,
                "embed_dim": encoder.embed_dim, "params": sum(p.numel() for p in encoder.model.parameters()),
                "pretrain_seconds": round(seconds, 1), "final_loss": final, "steps": len(losses),
                "pretrain": {**attrs.asdict(PRETRAIN), "loss": spec.loss, "lr": spec.lr, "seed": spec.seed, "steps": len(losses)},
            })
        if "finetune" in stages:
            from .. import load

            encoder = load(spec.family, str(out / name)).eval()
            accs = finetune_member(encoder, name, world, out, tasks or world.transfer_tasks, progress=False)
            for control in world.controls:
                accs[control] = {"zero_shot": zero_shot(encoder, world.task(control))}
            old = json.loads(manifest_path.read_text())["members"].get(name, {}).get("accuracy", {})
            _update_manifest(manifest_path, name, {"accuracy": {**old, **accs}})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ZOO_DIR), help="zoo folder (default: the package's worlds/zoo)")
    parser.add_argument("--members", nargs="+", default=[m.name for m in ZOO], help="members to (re)train")
    parser.add_argument("--steps", type=int, help="pretraining steps (default: zoo.PRETRAIN)")
    parser.add_argument("--corpus-size", type=int, default=CORPUS_SIZE)
    parser.add_argument("--stages", nargs="+", choices=("pretrain", "finetune"), default=["pretrain", "finetune"])
    parser.add_argument("--tasks", nargs="+", help="tasks to fine-tune on (default: the world's transfer tasks)")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    build(Path(args.out), args.members, args.steps, args.corpus_size, args.stages, args.tasks, progress=not args.quiet)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
