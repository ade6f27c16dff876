"""Rebuild the audio world's zoo: tokenizer, four pretrained CLAP members, source fine-tunes, manifest.

    python -m platonic_sdk.worlds.train_audio_zoo [--out DIR] [--members NAME ...] [--steps N]

Members and recipe come from `AUDIO_ZOO`, `AUDIO_PRETRAIN` and `AUDIO_CORPUS_SIZE` in worlds/audio.py
(world seed 0); weights ship in fp16, fine-tunes as fp16 media-tower task vectors (train_zoo's recipe).
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

from .audio import AUDIO_CORPUS_SIZE, AUDIO_PRETRAIN, AUDIO_ZOO, AUDIO_ZOO_DIR, AudioWorld
from .train_zoo import FINETUNE, finetune_member, world_tokenizer, zero_shot
from .zoo import MANIFEST


def _record(path: Path, name: str, entry: dict[str, Any], header: dict[str, Any]) -> None:
    """Merge one member's entry into the manifest (re-read first: members may train in parallel)."""
    manifest = json.loads(path.read_text()) if path.is_file() else {"members": {}}
    manifest.update(header)
    manifest["members"][name] = entry
    path.write_text(json.dumps(manifest, indent=1, sort_keys=True))


def build(out: Path, names: Sequence[str], steps: int | None = None, corpus_size: int = AUDIO_CORPUS_SIZE,
          progress: bool = True) -> None:
    """Pretrain, save (fp16) and fine-tune the named members into `out`."""
    from .. import from_config
    from .pretrain import pretrain

    specs = {m.name: m for m in AUDIO_ZOO}
    world = AudioWorld(seed=0)
    clips, captions = world.corpus(corpus_size)
    tokenizer = world_tokenizer(world, captions)
    config = attrs.evolve(AUDIO_PRETRAIN, **({"steps": steps} if steps else {}))
    header = {"world": "audio", "world_seed": world.seed, "corpus_size": corpus_size, "finetune": FINETUNE,
              "pretrain": attrs.asdict(config)}
    for name in names:
        spec = specs[name]
        started = time.perf_counter()
        encoder = from_config(spec.family, dict(spec.config), tokenizer=tokenizer, seed=spec.seed)
        losses = pretrain(encoder, clips, captions, attrs.evolve(config, lr=spec.lr, seed=spec.seed), progress=progress)
        seconds = time.perf_counter() - started
        folder = out / name
        shutil.rmtree(folder, ignore_errors=True)
        half = copy.deepcopy(encoder)
        half.model.to(torch.float16)
        half.save(str(folder))
        final = sum(losses[-50:]) / len(losses[-50:])
        print(f"{name}: pretrained in {seconds:.0f} s, final loss {final:.3f}", flush=True)
        accs = finetune_member(encoder, name, world, out, progress=False)
        for control in world.controls:
            accs[control] = {"zero_shot": zero_shot(encoder, world.task(control))}
        _record(out / MANIFEST, name, {
            "family": spec.family, "config": dict(spec.config), "loss": spec.loss, "seed": spec.seed,
            "embed_dim": encoder.embed_dim, "params": sum(p.numel() for p in encoder.model.parameters()),
            "pretrain_seconds": round(seconds, 1), "final_loss": float(final), "steps": len(losses), "accuracy": accs,
        }, header)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(AUDIO_ZOO_DIR), help="zoo folder (default: the package's worlds/zoo_audio)")
    parser.add_argument("--members", nargs="+", default=[m.name for m in AUDIO_ZOO], help="members to (re)train")
    parser.add_argument("--steps", type=int, help="pretraining steps (default: AUDIO_PRETRAIN)")
    parser.add_argument("--corpus-size", type=int, default=AUDIO_CORPUS_SIZE)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    build(Path(args.out), args.members, args.steps, args.corpus_size, progress=not args.quiet)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
