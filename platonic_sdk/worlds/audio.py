"""The built-in synthetic audio world: a captioned pretraining corpus and a suite of shifted tasks.

Pretraining clips (1 s at 8 kHz) are tones of six timbres in three registers with four envelopes,
1-4 notes and occasional pitch glides, and single bursts of white/pink/brown noise, all with a flat
spectrum. Each task takes one attribute as its label and moves the clips off the pretraining
distribution in a way that changes how the attribute reads out rather than whether it is encoded
(docs/method.md sec. 11), so the zoo's zero-shot failure lies in the readout:

- noise under a +2 dB/octave brightening tilt, one burst or 2-4 bursts (pretraining has one): the
  label *is* the spectral slope (pink -3, brown -6 dB/octave), and the tilt shifts every colour
  along it (pink reads as white), an additive offset in log-mel space;
- notes transposed up by about 8 semitones: the register boundaries move (a "low" note now sounds
  where "middle" ones did). The related trio: single notes, 2-4 note melodies, and (held out)
  vibrato notes, never heard in pretraining;
- single notes under a -7 dB/octave muffling tilt: timbre (the balance of partials) reads wrong.

The transfer tasks use two distinct label sets (noise colours, registers). The controls read what no
transfer task reads, on clips of the pretraining distribution: the timbre of single notes and of 2-4
note melodies, and the envelope of noise bursts. A control that shares its readout with a task (clean
registers, clean noise colours) measures the task's own readout, not collateral damage: undoing "bright
pink reads as white" moves the boundary that clean pink sits on too. Those sets stay available as
`clean_registers` and `clean_noises`, and `muffled_timbres` (timbre under a muffling tilt) stays as a
task outside the transfer set, since its attribute is the controls'. Measured on the zoo (world
seed 0): a linear probe on the frozen embeddings reads bright noises at 98-100% and the transposed
registers at 78-88%, against zero-shot 42-73%; zero-shot on the controls is 87-97% (single-note
timbres), 64-93% (melody timbres) and 40-51% (noise envelopes, chance 25%). Tried and left out,
since the zoo reads them through the shift (zero-shot 76-100%: little room to gain or to remove):
registers at -30 dB or under a +-7-9 dB/octave tilt, timbres under a treble-boosting tilt.
Envelopes of tones, note counts and glides sit near chance for two members (zero-shot 28-34%), too
weak for a task or a control.
Every clip is a pure function of (world seed, stream, index): the same seed gives the same samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Callable

import attrs
import numpy as np

from ..data.audio import Waveform
from ..tasks import Split, Task
from .seeded import SeededWorld, stream_key
from .registry import WorldSpec, register_world
from .sounds import ENVELOPES, NOISES, REGISTERS, TIMBRES, Sound, caption, synthesise

Sampler = Callable[[np.random.Generator, int], Sound]
MUFFLED = -7.0  # dB per octave of the timbre task's spectral tilt (pretraining: flat)
BRIGHT = 2.0  # dB per octave of the noise tasks' tilt
RAISED = 8.0  # semitones of the register trio's transposition


def _pick(rng: np.random.Generator, options) -> str:
    options = list(options)
    return options[int(rng.integers(len(options)))]


def tone(rng: np.random.Generator, **fixed) -> Sound:
    """A tone of the pretraining distribution (random timbre, register, envelope, glide); `fixed` overrides."""
    register = fixed.pop("register", None) or _pick(rng, REGISTERS)
    count = int(fixed.pop("count", 0) or (1 if rng.random() < 0.75 else rng.integers(2, 5)))
    glide = 0.0
    if count == 1 and rng.random() < 0.3:
        glide = float(rng.choice([-1.0, 1.0]) * rng.uniform(3.0, 7.0))
    fields = dict(
        kind="tone",
        timbre=_pick(rng, TIMBRES),
        register=register,
        f0=float(rng.uniform(*REGISTERS[register])),
        envelope=_pick(rng, ENVELOPES),
        count=count,
        fill=float(rng.uniform(0.6, 0.9)),
        glide=glide,
        gain=float(rng.uniform(0.3, 0.9)),
        floor=float(rng.uniform(0.001, 0.01)),
    )
    fields.update(fixed)
    return Sound(**fields)


def noise(rng: np.random.Generator, **fixed) -> Sound:
    """A noise burst of random colour and envelope."""
    fields = dict(
        kind="noise",
        noise=_pick(rng, NOISES),
        envelope=_pick(rng, ENVELOPES),
        fill=float(rng.uniform(0.6, 0.95)),
        gain=float(rng.uniform(0.3, 0.9)),
        floor=float(rng.uniform(0.001, 0.01)),
    )
    fields.update(fixed)
    return Sound(**fields)


def pretrain_sound(rng: np.random.Generator) -> Sound:
    """A sound of the pretraining distribution: 80% tones, 20% noise."""
    return noise(rng) if rng.random() < 0.2 else tone(rng)


# ---------------------------------------------------------------- tasks (label -> sound samplers)


@attrs.frozen
class TaskSpec:
    """A task of the world: class names, one template, and a sampler of a sound with a given label."""

    name: str
    classnames: tuple[str, ...]
    template: str
    sampler: Sampler
    description: str


def _timbres(tilt: float, count: tuple[int, int] = (1, 1)) -> Sampler:
    """Timbre of `count` steady-pitched notes under a spectral tilt of `tilt` +- 1 dB/octave (0: none)."""

    def sample(rng: np.random.Generator, label: int) -> Sound:
        return tone(rng, timbre=TIMBRE_NAMES[label], count=int(rng.integers(count[0], count[1] + 1)), glide=0.0,
                    tilt=float(rng.uniform(tilt - 1.0, tilt + 1.0)) if tilt else 0.0)

    return sample


def _registers(semitones: float, count: tuple[int, int] = (1, 1), vibrato: tuple[float, float] = (0.0, 0.0)) -> Sampler:
    """Register of `count` steady-pitched notes (optionally with vibrato) transposed by `semitones` +- 1 (0: none)."""

    def sample(rng: np.random.Generator, label: int) -> Sound:
        notes = int(rng.integers(count[0], count[1] + 1)) if count[1] > count[0] else count[0]
        depth = float(rng.uniform(*vibrato)) if vibrato[1] else 0.0
        sound = tone(rng, register=REGISTER_NAMES[label], count=notes, glide=0.0, vibrato=depth)
        shift = float(rng.uniform(semitones - 1.0, semitones + 1.0)) if semitones else 0.0
        return attrs.evolve(sound, f0=sound.f0 * 2.0 ** (shift / 12.0))

    return sample


def _noise_envelopes(rng: np.random.Generator, label: int) -> Sound:
    """Envelope of one noise burst of random colour, from the pretraining distribution."""
    return noise(rng, envelope=ENVELOPES[label])


def _noises(tilt: float, count: tuple[int, int] = (1, 1), fill: tuple[float, float] = (0.6, 0.95)) -> Sampler:
    """Colour of `count` noise bursts filling `fill` of their beats under a spectral tilt of `tilt` +- 1 dB/octave (0: none)."""

    def sample(rng: np.random.Generator, label: int) -> Sound:
        return noise(rng, noise=NOISES[label], count=int(rng.integers(count[0], count[1] + 1)), fill=float(rng.uniform(*fill)),
                     tilt=float(rng.uniform(tilt - 1.0, tilt + 1.0)) if tilt else 0.0)

    return sample


TIMBRE_NAMES, REGISTER_NAMES = tuple(TIMBRES), tuple(REGISTERS)
TIMBRE, REGISTER, NOISE = "the sound of a {}.", "the sound of a {} tone.", "the sound of {} noise."
MELODY = "the sound of {} notes."
TASK_SPECS: dict[str, TaskSpec] = {
    spec.name: spec
    for spec in (
        TaskSpec("raised_notes", REGISTER_NAMES, REGISTER, _registers(RAISED),
                 "register of a single note transposed up by about 8 semitones"),
        TaskSpec("raised_melodies", REGISTER_NAMES, REGISTER, _registers(RAISED, count=(2, 4)),
                 "register of 2-4 notes transposed up by about 8 semitones"),
        TaskSpec("raised_vibrato", REGISTER_NAMES, REGISTER, _registers(RAISED, vibrato=(0.4, 0.8)),
                 "register of a vibrato note (never in pretraining) transposed up by about 8 semitones"),
        TaskSpec("bright_noises", NOISES, NOISE, _noises(BRIGHT), "colour of a noise burst under a brightening tilt"),
        TaskSpec("bright_bursts", NOISES, NOISE, _noises(BRIGHT, count=(2, 4)),
                 "colour of 2-4 noise bursts (pretraining has one) under a brightening tilt"),
        TaskSpec("muffled_timbres", TIMBRE_NAMES, TIMBRE, _timbres(MUFFLED), "timbre of a single note under a muffling tilt"),
        TaskSpec("clean_registers", REGISTER_NAMES, REGISTER, _registers(0.0),
                 "pitch registers of single notes from the pretraining distribution (the raised tasks' readout: not a control)"),
        TaskSpec("clean_noises", NOISES, NOISE, _noises(0.0),
                 "colours of noise bursts from the pretraining distribution (the bright tasks' readout: not a control)"),
        TaskSpec("control_timbres", TIMBRE_NAMES, TIMBRE, _timbres(0.0),
                 "control: timbres of single notes from the pretraining distribution"),
        TaskSpec("control_melody_timbres", TIMBRE_NAMES, MELODY, _timbres(0.0, count=(2, 4)),
                 "control: timbres of 2-4 note melodies from the pretraining distribution"),
        TaskSpec("control_noise_envelopes", ENVELOPES, NOISE, _noise_envelopes,
                 "control: envelopes of noise bursts from the pretraining distribution"),
    )
}


@attrs.frozen(eq=False)
class Clips(Sequence):
    """Sounds rendered on access: item i is `synthesise(sounds[i])` with its own seeded generator."""

    sounds: tuple[Sound, ...]
    keys: tuple[tuple[int, int, int], ...]  # (world seed, stream key, index) per clip
    rate: int
    seconds: float

    def __len__(self) -> int:
        return len(self.sounds)

    def __getitem__(self, i: int) -> Waveform:  # type: ignore[override]
        if isinstance(i, slice):
            raise TypeError("Clips does not slice; index it item by item")
        rng = np.random.default_rng([*self.keys[i], 1])
        return Waveform(synthesise(self.sounds[i], rng, self.rate, self.seconds), self.rate)


@attrs.frozen
class AudioWorld(SeededWorld):
    """A seeded synthetic audio world: `corpus(n)` to pretrain on, `task(name)` to fine-tune and evaluate.

    Train and test splits come from disjoint seed streams; the held-out member of the related trio
    (`trio[2]`) is never probed by the demo.
    """

    specs = TASK_SPECS
    kind = "audio"

    seed: int = 0
    rate: int = 8000
    seconds: float = 1.0
    train_per_class: int = 64
    test_per_class: int = 40

    trio: tuple[str, str, str] = ("raised_notes", "raised_melodies", "raised_vibrato")
    controls: tuple[str, ...] = ("control_timbres", "control_melody_timbres", "control_noise_envelopes")
    demo_tasks: tuple[str, ...] = ("bright_noises", "bright_bursts", "raised_notes", "raised_melodies")

    def _clips(self, stream: str, sounds: list[Sound], offset: int = 0) -> Clips:
        keys = tuple((self.seed, stream_key(stream), offset + i) for i in range(len(sounds)))
        return Clips(tuple(sounds), keys, self.rate, self.seconds)

    def corpus(self, n: int, offset: int = 0) -> tuple[Clips, list[str]]:
        """n pretraining clips (rendered lazily) and their captions."""
        sounds, captions = [], []
        for i in range(n):
            rng = self.rng("pretrain", offset + i)
            sound = pretrain_sound(rng)
            sounds.append(sound)
            captions.append(caption(sound, rng))
        return self._clips("pretrain", sounds, offset), captions

    def _build(self, name: str) -> Task:
        spec = TASK_SPECS[name]
        m = len(spec.classnames)
        splits = {}
        for split, per_class in (("train", self.train_per_class), ("test", self.test_per_class)):
            labels = np.arange(per_class * m) % m
            stream = f"{name}/{split}"
            sounds = [spec.sampler(self.rng(stream, i), int(y)) for i, y in enumerate(labels)]
            splits[split] = Split(self._clips(stream, sounds), labels)
        return Task(name, spec.classnames, splits["train"], splits["test"], (spec.template,))


# ---------------------------------------------------------------- the audio zoo (its recipe: audio_zoo.py)

AUDIO_ZOO_DIR = Path(__file__).parent / "zoo_audio"
# The world's settings, recorded in its zoo's manifest (zoo_audio/zoo.json, `settings`). Ridge factors
# (docs/method.md sec. 11: the landmark ridge mu_b is the control lever
# with tiny text towers). mu_b was chosen on world seed 0 by task figures alone, never the controls:
# 1.0 and 0.3 (relative) missed issue 15's negation threshold (removed-task drop 6.2 and 8.5, >= 10
# asked), so 0.1. The controls pay for it (docs/method.md, "Evaluation").
# The LoRA route's optimiser on this world: docs/method.md sec. 5's 20 epochs (100-120 steps here; an audio step
# costs ~5 image steps), lr chosen on the training loss alone as for the image world: with the landmark
# ridge the matching loss ends at 0.75 / 0.69 / 0.65 of its start at lr 3e-4 / 1e-3 / 3e-3 (seed 0,
# three addition cells, on the previous zoo).
register_world(WorldSpec("audio", AudioWorld, AUDIO_ZOO_DIR))
