"""Sounds of the synthetic audio world: what a clip contains, how it is synthesised, how it is described.

A `Sound` is a small value object (a tone of some timbre, register, envelope, note count and pitch
glide, or a burst of coloured noise; optionally under a spectral tilt, the audio analogue of a colour
tint: a gain of `tilt` dB per octave, i.e. an additive offset in log-mel space). `synthesise` renders
it as a mono clip, `caption` describes a random subset of its attributes with a small grammar.
Everything is a pure function of the sound and a numpy Generator, so a seed fixes every sample.
"""

from __future__ import annotations

import attrs
import numpy as np

# Harmonic amplitude profiles a_k (partial k at k * f0), and the bell's inharmonic partials.
TIMBRES: dict[str, tuple[tuple[float, float], ...]] = {
    "whistle": ((1.0, 1.0),),
    "flute": ((1.0, 1.0), (2.0, 0.35), (3.0, 0.12)),
    "clarinet": tuple((float(k), 1.0 / k) for k in (1, 3, 5, 7, 9, 11)),
    "horn": tuple((float(k), 1.0 / k) for k in range(1, 13)),
    "organ": tuple((float(k), 0.8) for k in (1, 2, 4, 8)),
    "bell": ((1.0, 1.0), (2.76, 0.6), (5.40, 0.4), (8.93, 0.25)),
}
REGISTERS: dict[str, tuple[float, float]] = {"low": (110.0, 180.0), "middle": (260.0, 420.0), "high": (600.0, 950.0)}
ENVELOPES: tuple[str, ...] = ("steady", "fading", "swelling", "pulsing")
GLIDES: tuple[str, ...] = ("steady", "rising", "falling")
NOISES: tuple[str, ...] = ("white", "pink", "brown")
COUNTS: tuple[str, ...] = ("one", "two", "three", "four")


@attrs.frozen
class Sound:
    """One clip: `count` notes of a tone (or one noise burst) filling `fill` of their beats.

    `f0` in Hz; `glide` in semitones over a note (sign = direction); `vibrato` in semitones (6 Hz);
    `tilt` in dB per octave around 400 Hz; `gain` is the peak level; `floor` the noise floor level.
    """

    kind: str  # "tone" | "noise"
    timbre: str = "whistle"
    register: str = "middle"
    f0: float = 330.0
    envelope: str = "steady"
    count: int = 1
    fill: float = 0.9
    glide: float = 0.0
    vibrato: float = 0.0
    noise: str = "white"
    tilt: float = 0.0
    gain: float = 0.7
    floor: float = 0.003

    @property
    def glide_word(self) -> str:
        return "steady" if self.glide == 0 else ("rising" if self.glide > 0 else "falling")


def _envelope(kind: str, n: int, rate: int) -> np.ndarray:
    """Amplitude envelope of one note of n samples (10 ms fades at both ends)."""
    t = np.arange(n) / rate
    dur = n / rate
    if kind == "steady":
        env = np.ones(n)
    elif kind == "fading":
        env = np.exp(-5.0 * t / dur)
    elif kind == "swelling":
        env = np.exp(-5.0 * (dur - t) / dur)
    elif kind == "pulsing":
        env = 0.55 + 0.45 * np.cos(2 * np.pi * 9.0 * t)
    else:
        raise ValueError(f"unknown envelope {kind!r}")
    ramp = min(n // 2, int(0.01 * rate))
    if ramp:
        env[:ramp] *= np.linspace(0, 1, ramp)
        env[-ramp:] *= np.linspace(1, 0, ramp)
    return env


def _tone(sound: Sound, n: int, rate: int) -> np.ndarray:
    """One note: band-limited partials of the timbre on a gliding, optionally vibrating pitch."""
    t = np.arange(n) / rate
    semis = sound.glide * t / (n / rate) + sound.vibrato * np.sin(2 * np.pi * 6.0 * t)
    freq = sound.f0 * 2.0 ** (semis / 12.0)
    phase = 2 * np.pi * np.cumsum(freq) / rate
    out = np.zeros(n)
    top = freq.max()
    for ratio, amp in TIMBRES[sound.timbre]:
        if ratio * top < 0.45 * rate:
            decay = np.exp(-3.0 * (ratio - 1) * t) if sound.timbre == "bell" else 1.0
            out += amp * decay * np.sin(ratio * phase)
    return out


def _coloured_noise(colour: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """White, pink (power ~ 1/f) or brown (~ 1/f^2) noise, shaped in the frequency domain."""
    spec = np.fft.rfft(rng.standard_normal(n))
    f = np.maximum(np.arange(spec.size), 1.0)
    power = {"white": 0.0, "pink": 1.0, "brown": 2.0}[colour]
    return np.fft.irfft(spec / f ** (power / 2), n)


def _tilt(x: np.ndarray, db_per_octave: float, rate: int) -> np.ndarray:
    """Spectral tilt: gain (f / 400 Hz)^(dB/oct / 6.02), clipped to +-24 dB."""
    spec = np.fft.rfft(x)
    f = np.maximum(np.fft.rfftfreq(x.size, 1 / rate), 20.0)
    gain_db = np.clip(db_per_octave * np.log2(f / 400.0), -24.0, 24.0)
    return np.fft.irfft(spec * 10 ** (gain_db / 20), x.size)


def synthesise(sound: Sound, rng: np.random.Generator, rate: int = 8000, seconds: float = 1.0) -> np.ndarray:
    """Render `sound` as float32 mono samples (peak = sound.gain), plus a faint white noise floor."""
    total = int(round(rate * seconds))
    clip = np.zeros(total)
    beat = total // sound.count
    note = max(int(0.02 * rate), int(beat * sound.fill))
    for i in range(sound.count):
        start = i * beat + (beat - note) // 2
        if sound.kind == "noise":
            body = _coloured_noise(sound.noise, note, rng)
        else:
            body = _tone(sound, note, rate)
        body = body / (np.abs(body).max() + 1e-9)
        clip[start : start + note] += body * _envelope(sound.envelope, note, rate)
    if sound.tilt:
        clip = _tilt(clip, sound.tilt, rate)
    clip = sound.gain * clip / (np.abs(clip).max() + 1e-9)
    clip += sound.floor * rng.standard_normal(total)
    return clip.astype(np.float32)


def caption(sound: Sound, rng: np.random.Generator) -> str:
    """Describe a random subset of the sound's attributes (at least one) with a small grammar.

    Tones: "[the sound of] a [envelope] [register] [rising|falling] {timbre|tone}", or with several
    notes "{count} [register] {timbre|tone} notes"; noise: "[envelope] {colour} noise".
    """
    keep = lambda p: bool(rng.random() < p)  # noqa: E731
    prefix = "the sound of " if keep(0.5) else ""
    envelope = sound.envelope if keep(0.4) else ""
    if sound.kind == "noise":
        return f"{prefix}{envelope} {sound.noise} noise".replace("  ", " ").strip()
    timbre = sound.timbre if keep(0.6) else ""
    register = sound.register if keep(0.5) else ""
    if sound.count > 1 or keep(0.1):
        words = [COUNTS[sound.count - 1], register, timbre, "notes" if sound.count > 1 else "note"]
        return prefix + " ".join(w for w in words if w)
    glide = sound.glide_word if sound.glide and keep(0.7) else ""
    if not (envelope or register or glide or timbre):
        timbre = sound.timbre
    words = [envelope, register, glide, timbre or "tone"]
    return prefix + "a " + " ".join(w for w in words if w)
