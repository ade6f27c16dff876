"""What the `real_audio` world's clips and its heads' pretraining corpus are made of: instruments, drums, voices
and words, as data, and the seeded draws that pick each clip (rendered by real_audio_sources.py).

The shipped clips and the corpus never share an instrument program, a drum kit or a word list, so that zero-shot
and the fine-tunes are measured on sounds the heads were not trained on:
- notes: each family's shipped programs (`SHIPPED_PROGRAMS`) are not among its corpus programs;
- drums: the shipped clips come from four FluidR3 kits and the freely licensed hydrogen kits, the corpus from
  the other four FluidR3 kits;
- speech: the corpus speaks the digits too (clean, by its own speakers), and other words; the control's words
  are never spoken in it.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from .real_audio import DIGITS, DRUMS, FAMILIES, REGISTERS, SPEAKERS
from .seeded import stream_key

# General MIDI programs (0-based) by family: the shipped clips' and the corpus's, disjoint
SHIPPED_PROGRAMS = {"piano": (0, 4), "organ": (16, 19), "guitar": (24, 26), "bowed strings": (40, 42), "brass": (56, 60),
                    "woodwind": (66, 71)}
CORPUS_PROGRAMS = {"piano": (1, 2, 3, 5), "organ": (17, 18, 20), "guitar": (25, 27, 28), "bowed strings": (41, 44, 48, 49),
                   "brass": (57, 59, 61, 62), "woodwind": (65, 68, 70, 73)}
LOWEST = 36  # C2: register r covers MIDI pitches 36 + 12 r .. 47 + 12 r
NOTES_PER_CELL, NOTES_TRAIN = 10, 5  # per (family, register): 5 train + 5 test

# GM drum kits (programs on the percussion channel) and GM drum keys per kind
SHIPPED_KITS, CORPUS_KITS = (8, 24, 32, 48), (0, 16, 25, 40)
GM_DRUMS = {"kick drum": (35, 36), "snare drum": (38, 40), "hi-hat": (42, 44, 46), "tom-tom": (41, 43, 45, 47, 48, 50),
            "cymbal": (49, 51, 52, 55, 57, 59)}
HYDROGEN_KINDS = ((r"kick|bass ?drum", "kick drum"), (r"snare(?! roll)", "snare drum"), (r"h(i[- ]?)?h(at)?\b|hat", "hi-hat"),
                  (r"tom", "tom-tom"), (r"crash|ride|cymbal|china|splash", "cymbal"))
DRUMS_PER_KIND, DRUMS_TRAIN = 24, 12

ACCENTS = ("en-us", "en-gb-x-rp", "en-gb-scotland", "en-029", "en-us-nyc", "en-gb-x-gbclan", "en-gb-x-gbcwmd")
MALE = ("m1", "m2", "m3", "m4", "m5", "m6", "m7", "adam", "Alex", "Andy", "benjamin", "caleb", "david", "ed", "edward",
        "Gene", "john", "max", "Michael", "Mike", "paul", "rob", "robert", "Lee", "quincy", "zac")
FEMALE = ("f1", "f2", "f3", "f4", "f5", "Alicia", "Andrea", "Annie", "aunty", "belinda", "linda", "steph", "steph2", "steph3",
          "anika")
DIGITS_PER_CLASS, DIGITS_TRAIN = 40, 24
CONTROL_WORDS = ("apple", "river", "window", "yellow", "morning", "garden", "pencil", "thunder")
SPEAKERS_PER_CLASS, SPEAKERS_TRAIN = 32, 16
CORPUS_WORDS = ("water", "table", "music", "orange", "mountain", "coffee", "paper", "silver", "happy", "chair", "doctor",
                "island", "kitchen", "letter", "summer", "winter", "window seat", "blue", "green", "house", "train", "bird",
                "flower", "money", "city", "forest", "hello", "goodbye", "please", "thank you", "yes", "no", "sugar",
                "market", "pocket", "rabbit", "candle", "basket", "guitar", "piano")
CORPUS_DIGITS = 40  # clean speakers per digit
CORPUS_SPEECH = 640


def _voice(rng: np.random.Generator, sex: int) -> dict[str, Any]:
    """A speaker: accent, voice variant of that sex (0 man, 1 woman), speed (words a minute), pitch (0-99)."""
    return {"voice": f"{ACCENTS[rng.integers(len(ACCENTS))]}+{(MALE, FEMALE)[sex][rng.integers(len((MALE, FEMALE)[sex]))]}",
            "speed": int(rng.integers(120, 200)), "pitch": int(rng.integers(20, 80))}


def _split(rng: np.random.Generator, n: int, n_train: int) -> list[int]:
    codes = np.array([0] * n_train + [1] * (n - n_train))
    return codes[rng.permutation(n)].tolist()


def note_plan() -> list[dict[str, Any]]:
    """The shipped notes: per family and register NOTES_PER_CELL notes (program, pitch, velocity) and a split code."""
    rows = []
    for f, family in enumerate(FAMILIES):
        for r in range(len(REGISTERS)):
            rng = np.random.default_rng(stream_key(f"notes/{family}/{r}"))
            pitches = LOWEST + 12 * r + rng.permutation(12)[:NOTES_PER_CELL]
            splits = _split(rng, NOTES_PER_CELL, NOTES_TRAIN)
            for i, (pitch, split) in enumerate(zip(pitches, splits)):
                rows.append({"family": f, "register": r, "split": split, "program": SHIPPED_PROGRAMS[family][i % 2],
                             "pitch": int(pitch), "velocity": int(rng.integers(70, 116))})
    return rows


def speech_plan() -> list[dict[str, Any]]:
    """The shipped digits: per digit DIGITS_PER_CLASS speakers (half men, half women) and a split code."""
    rows = []
    for d, digit in enumerate(DIGITS):
        rng = np.random.default_rng(stream_key(f"speech/{digit}"))
        splits = _split(rng, DIGITS_PER_CLASS, DIGITS_TRAIN)
        for i, split in enumerate(splits):
            rows.append({"digit": d, "split": split, "word": digit, **_voice(rng, i % 2)})
    return rows


def speaker_plan() -> list[dict[str, Any]]:
    """The control's clips: per sex SPEAKERS_PER_CLASS speakers saying one of CONTROL_WORDS, and a split code."""
    rows = []
    for s, sex in enumerate(SPEAKERS):
        rng = np.random.default_rng(stream_key(f"speakers/{sex}"))
        splits = _split(rng, SPEAKERS_PER_CLASS, SPEAKERS_TRAIN)
        for split in splits:
            rows.append({"speaker": s, "split": split, "word": CONTROL_WORDS[rng.integers(len(CONTROL_WORDS))], **_voice(rng, s)})
    return rows


def hydrogen_kind(name: str) -> str | None:
    """The drum kind a hydrogen instrument name reads as (None: another instrument, e.g. a cowbell or a clap)."""
    low = name.lower()
    if re.search(r"stick|clap|cowbell|roll|bell|rim|zap|fx|conga|tamb", low):
        return None
    return next((kind for pattern, kind in HYDROGEN_KINDS if re.search(pattern, low)), None)


def drum_plan(hydrogen: list[tuple[str, str, Any]]) -> list[dict[str, Any]]:
    """The shipped drums: per kind DRUMS_PER_KIND one-shots, the hydrogen samples of that kind first (up to half), the
    rest from the shipped FluidR3 kits (kit, key, velocity drawn), and a split code."""
    rows = []
    for k, kind in enumerate(DRUMS):
        rng = np.random.default_rng(stream_key(f"drums/{kind}"))
        samples = [(kit, name, str(path)) for kit, name, path in hydrogen if hydrogen_kind(name) == kind]
        picked = [samples[i] for i in rng.permutation(len(samples))[: DRUMS_PER_KIND // 2]]
        kind_rows = [{"source": "hydrogen", "kit": kit, "instrument": name, "file": path} for kit, name, path in picked]
        while len(kind_rows) < DRUMS_PER_KIND:
            kind_rows.append({"source": "fluidr3", "kit": int(SHIPPED_KITS[rng.integers(len(SHIPPED_KITS))]),
                              "key": int(GM_DRUMS[kind][rng.integers(len(GM_DRUMS[kind]))]), "velocity": int(rng.integers(60, 128))})
        for row, split in zip(kind_rows, _split(rng, DRUMS_PER_KIND, DRUMS_TRAIN)):
            rows.append({"drum": k, "split": split, **row})
    return rows


def corpus_plan() -> dict[str, list[dict[str, Any]]]:
    """The pretraining corpus, by source: every corpus program at every pitch C2-B5 (captioned by family), every corpus
    kit's drums at three velocities (by kind), CORPUS_SPEECH speakers saying a corpus word and CORPUS_DIGITS saying
    each digit (by sex and word)."""
    rng = np.random.default_rng(stream_key("corpus"))
    notes = [{"family": family, "program": p, "pitch": pitch, "velocity": int(rng.integers(70, 116))}
             for family, programs in CORPUS_PROGRAMS.items() for p in programs for pitch in range(LOWEST, LOWEST + 48)]
    drums = [{"kind": kind, "kit": kit, "key": key, "velocity": v} for kind, keys in GM_DRUMS.items() for kit in CORPUS_KITS
             for key in keys for v in (60, 90, 120)]
    speech = [{"sex": SPEAKERS[i % 2], "word": CORPUS_WORDS[rng.integers(len(CORPUS_WORDS))], **_voice(rng, i % 2)}
              for i in range(CORPUS_SPEECH)]
    speech += [{"sex": SPEAKERS[i % 2], "word": digit, **_voice(rng, i % 2)} for digit in DIGITS for i in range(CORPUS_DIGITS)]
    return {"notes": notes, "drums": drums, "speech": speech}
