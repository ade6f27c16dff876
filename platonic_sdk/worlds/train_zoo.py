"""Rebuild a world's shipped zoo: tokenizer, pretrained members, source fine-tunes, manifest.

    python -m platonic_sdk.worlds.train_zoo [--modality image|audio] [--out DIR] [--members NAME ...] [--steps N]

Everything comes from the world's `ZooRecipe` (image: `zoo.ZOO_RECIPE`, audio:
`audio_zoo.AUDIO_ZOO_RECIPE`): members are pretrained on the corpus of world seed 0 with their family's
loss, then fine-tuned on every transfer task with rank-4 LoRA (docs/method.md sec. 6); each fine-tune's
media-tower task vector is stored in fp16.
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import time
from pathlib import Path
from typing import Any, Sequence

import attrs
import torch

from ..adapters._text import train_tokenizer
from ..atomic import write_text
from ..encoding.zeroshot import accuracy
from ..finetune.source import FinetuneConfig, finetune
from ..finetune.weightspace import TaskVector
from ..registry import from_config, load
from ..zoo_settings import stamp_members
from .audio_zoo import AUDIO_ZOO_RECIPE
from .pretrain import pretrain
from .registry import world_spec
from .zoo import MANIFEST, ZOO_RECIPE, ZooMember, ZooRecipe, finetune_path

RECIPES: dict[str, ZooRecipe] = {"image": ZOO_RECIPE, "audio": AUDIO_ZOO_RECIPE}


def world_tokenizer(world: Any, captions: Sequence[str]):
    """A word-level tokenizer of the corpus captions and every task prompt (context 16)."""
    prompts = [p for name in world.task_names for cls in world.task(name).prompts() for p in cls]
    return train_tokenizer(list(captions) + prompts, vocab_size=400, max_length=16)


def zero_shot(encoder: Any, task: Any) -> float:
    return float(accuracy(encoder, task))


def train_member(recipe: ZooRecipe, spec: ZooMember, corpus: Any, captions: Sequence[str], tokenizer: Any,
                 steps: int | None, progress: bool):
    """A fresh member built through its family adapter and pretrained with its family's loss; (encoder, losses, config)."""
    encoder = from_config(spec.family, dict(spec.config), tokenizer=tokenizer, seed=spec.seed)
    config = attrs.evolve(recipe.pretrain, loss=spec.loss, lr=spec.lr, seed=spec.seed, **({"steps": steps} if steps else {}))
    return encoder, pretrain(encoder, corpus, captions, config, progress=progress), config


def finetune_member(recipe: ZooRecipe, encoder: Any, name: str, world: Any, root: Path, tasks: Sequence[str]) -> dict[str, dict[str, float]]:
    """Fine-tune `encoder` on each of `tasks` with the recipe; save fp16 task vectors; return accuracies."""
    record = {}
    for task_name in tasks:
        task = world.task(task_name)
        ft = finetune(encoder, task, FinetuneConfig(**recipe.finetune), progress=False)
        half = TaskVector({k: v.half() for k, v in ft.task_vector.deltas.items()}, ft.task_vector.metadata)
        half.save(finetune_path(root, name, task_name))
        record[task_name] = {"zero_shot": zero_shot(encoder, task), "finetuned": zero_shot(ft.encoder, task)}
        print(f"  {name:9s} {task_name:20s} zero-shot {record[task_name]['zero_shot']:5.1f}  fine-tuned {record[task_name]['finetuned']:5.1f}", flush=True)
    return record


def _update_manifest(path: Path, name: str | None, entry: dict[str, Any], **top: Any) -> None:
    """Read-modify-write of the manifest (several build processes may share one zoo folder; written atomically), then
    the world's settings stamped into every member saved so far (zoo_settings.stamp_members)."""
    manifest = json.loads(path.read_text()) if path.is_file() else {"members": {}}
    manifest.update(top)
    if name is not None:
        manifest["members"][name] = {**manifest["members"].get(name, {}), **entry}
    write_text(path, json.dumps(manifest, indent=1, sort_keys=True))
    stamp_members(path.parent)


def _save(encoder: Any, folder: Path, half: bool) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    if half:
        encoder = copy.deepcopy(encoder)
        encoder.model.to(torch.float16)
    encoder.save(str(folder))


def build(recipe: ZooRecipe, out: Path, names: Sequence[str], steps: int | None = None, corpus_size: int | None = None,
          stages: Sequence[str] = ("pretrain", "finetune"), tasks: Sequence[str] | None = None, progress: bool = True) -> None:
    """Pretrain and/or fine-tune the recipe's named members into `out`, recording each in the manifest."""
    world = recipe.world()
    corpus_size = corpus_size or recipe.corpus_size
    manifest_path = out / MANIFEST
    out.mkdir(parents=True, exist_ok=True)
    settings = world_spec(recipe.name).settings()  # the world's, from its shipped zoo: its members carry them wherever copied
    _update_manifest(manifest_path, None, {}, world=recipe.name, world_seed=world.seed, corpus_size=corpus_size,
                     finetune=dict(recipe.finetune), settings=settings.record())
    if "pretrain" in stages:
        t0 = time.perf_counter()
        corpus, captions = world.corpus(corpus_size)
        tokenizer = world_tokenizer(world, captions)
        print(f"corpus of {corpus_size} in {time.perf_counter() - t0:.1f} s; vocabulary {len(tokenizer)}", flush=True)
    for name in names:
        spec = recipe.member(name)
        if "pretrain" in stages:
            t1 = time.perf_counter()
            encoder, losses, config = train_member(recipe, spec, corpus, captions, tokenizer, steps, progress)
            _save(encoder, out / name, recipe.half)
            seconds = time.perf_counter() - t1
            final = float(sum(losses[-50:]) / len(losses[-50:]))
            print(f"{name}: pretrained in {seconds:.0f} s, final loss {final:.3f}", flush=True)
            _update_manifest(manifest_path, name, {
                "family": spec.family, "config": dict(spec.config), "loss": spec.loss, "seed": spec.seed,
                "embed_dim": encoder.embed_dim, "params": sum(p.numel() for p in encoder.model.parameters()),
                "pretrain_seconds": round(seconds, 1), "final_loss": final, "steps": len(losses),
                "pretrain": attrs.asdict(config),
            })
        if "finetune" in stages:
            encoder = load(spec.family, str(out / name)).eval()
            accs = finetune_member(recipe, encoder, name, world, out, tasks or world.transfer_tasks)
            for control in world.controls:
                accs[control] = {"zero_shot": zero_shot(encoder, world.task(control))}
            old = json.loads(manifest_path.read_text())["members"].get(name, {}).get("accuracy", {})
            _update_manifest(manifest_path, name, {"accuracy": {**old, **accs}})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modality", choices=sorted(RECIPES), default="image", help="which world's zoo (image)")
    parser.add_argument("--out", help="zoo folder (default: the package's worlds/zoo or worlds/zoo_audio)")
    parser.add_argument("--members", nargs="+", help="members to (re)train (default: all of the recipe's)")
    parser.add_argument("--steps", type=int, help="pretraining steps (default: the recipe's)")
    parser.add_argument("--corpus-size", type=int, help="captioned corpus items (default: the recipe's)")
    parser.add_argument("--stages", nargs="+", choices=("pretrain", "finetune"), default=["pretrain", "finetune"])
    parser.add_argument("--tasks", nargs="+", help="tasks to fine-tune on (default: the world's transfer tasks)")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    recipe = RECIPES[args.modality]
    torch.set_num_threads(1)
    build(recipe, Path(args.out or recipe.folder), args.members or [m.name for m in recipe.members], args.steps,
          args.corpus_size, args.stages, args.tasks, progress=not args.quiet)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
