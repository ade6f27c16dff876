"""Real sounds rendered from Debian packages, for the `real_audio` world's clips and its heads' pretraining corpus.

Needed only to render (`python -m platonic_sdk.worlds.train_real_audio_zoo --stages data`, and `pretrain`'s
corpus), never at run time:

    apt-get install fluid-soundfont-gm fluidsynth hydrogen-drumkits espeak-ng

- notes: General MIDI programs of the FluidR3 soundfont (`fluid-soundfont-gm`, MIT) played by `fluidsynth`
  (reverb and chorus off: the same MIDI file renders to the same samples), one long file per batch of notes;
- drums: one-shot samples of the hydrogen drum kits (`hydrogen-drumkits`) whose licence lets an
  Apache-2.0 project redistribute them (CC0, CC-BY-3.0, CC-BY-SA-3.0), by instrument name;
- speech: words spoken by `espeak-ng` (its formant voices: English accents, voice variants, speeds, pitches).

Every clip is mono float32 at 16 kHz, `SECONDS` long (cropped or zero-padded), its RMS over the loud part set
to `LEVEL` (peaks kept below 0.99).
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import PlatonicError

RATE = 16_000
SECONDS = 1.0
LEVEL = 0.1  # RMS of the loud part (-20 dBFS)
SOUNDFONT = Path("/usr/share/sounds/sf2/FluidR3_GM.sf2")
DRUMKITS = Path("/usr/share/hydrogen/data/drumkits")
# kits whose licence allows redistribution by an Apache-2.0 project (Debian's /usr/share/doc/hydrogen-drumkits/copyright)
KIT_LICENCES = {"Audiophob": "CC0", "rumpf_kit_z01_h2": "CC-BY-3.0 (Emanuel Rumpf)",
                "BJA_Pacific": "CC-BY-SA-3.0-us (Luc Tunguay)"}
APT = "apt-get install fluid-soundfont-gm fluidsynth hydrogen-drumkits espeak-ng"
TICKS = 480  # per quarter note; at the default 120 bpm, 960 ticks a second


def _need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise PlatonicError(f"rendering the real_audio clips needs {tool}: {APT}")
    return path


def fit(samples: np.ndarray, rate: int = RATE, seconds: float = SECONDS, level: float = LEVEL) -> np.ndarray:
    """A clip as the world ships it: mono float32, `seconds` long from its start, RMS of its loud frames
    (those within 30 dB of the loudest 10 ms) set to `level`, peak at most 0.99."""
    x = np.asarray(samples, np.float32)
    if x.ndim == 2:
        x = x.mean(axis=1)
    n = int(round(seconds * rate))
    x = np.pad(x[:n], (0, max(0, n - len(x))))
    frames = x[: len(x) // 160 * 160].reshape(-1, 160)
    energy = (frames**2).mean(axis=1)
    if energy.max() <= 0:
        raise PlatonicError("a rendered clip is silent")
    loud = frames[energy >= energy.max() * 1e-3]
    x = x * (level / np.sqrt((loud**2).mean()))
    peak = np.abs(x).max()
    return (x * (0.99 / peak) if peak > 0.99 else x).astype(np.float32)


def _vlq(n: int) -> bytes:
    out = [n & 0x7F]
    n >>= 7
    while n:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    return bytes(reversed(out))


def midi_file(notes: Sequence[tuple[int, int, int]], hold: float = 0.8, spacing: float = 2.0, drums: bool = False) -> bytes:
    """A format-0 MIDI file playing (program, pitch, velocity) notes one after another, each held `hold` s, a
    note starting every `spacing` s; on channel 0, or with `drums` on the percussion channel (10), where the
    program picks the drum kit and the pitch the drum."""
    events, gap, ch = b"", 0, 9 if drums else 0
    for program, pitch, velocity in notes:
        events += _vlq(gap) + bytes([0xC0 | ch, program]) + _vlq(0) + bytes([0x90 | ch, pitch, velocity])
        events += _vlq(int(hold * 2 * TICKS)) + bytes([0x80 | ch, pitch, 0])
        gap = int((spacing - hold) * 2 * TICKS)
    events += _vlq(gap) + b"\xff\x2f\x00"
    return b"MThd" + struct.pack(">IHHH", 6, 0, 1, TICKS) + b"MTrk" + struct.pack(">I", len(events)) + events


def render_notes(notes: Sequence[tuple[int, int, int]], hold: float = 0.8, spacing: float = 2.0, drums: bool = False) -> list[np.ndarray]:
    """Each (GM program, MIDI pitch, velocity) note as a clip (`drums`: (GM drum kit, GM drum, velocity)), from one
    fluidsynth run over a file of all of them."""
    import soundfile as sf

    if not SOUNDFONT.is_file():
        raise PlatonicError(f"rendering the real_audio notes needs {SOUNDFONT}: {APT}")
    fluidsynth = _need("fluidsynth")
    with tempfile.TemporaryDirectory() as tmp:
        mid, wav = Path(tmp) / "notes.mid", Path(tmp) / "notes.wav"
        mid.write_bytes(midi_file(notes, hold, spacing, drums))
        subprocess.run([fluidsynth, "-ni", "-q", "-R", "0", "-C", "0", "-g", "0.5", "-r", str(RATE), "-F", str(wav), "-T", "wav",
                        str(SOUNDFONT), str(mid)], check=True, capture_output=True)
        audio, rate = sf.read(wav, dtype="float32", always_2d=True)
    if rate != RATE:
        raise PlatonicError(f"fluidsynth rendered at {rate} Hz, not {RATE}")
    step = int(spacing * RATE)
    return [fit(audio[i * step:(i + 1) * step]) for i in range(len(notes))]


def _resample(x: np.ndarray, rate: int) -> np.ndarray:
    if rate == RATE:
        return x
    import torch
    from torchaudio.functional import resample

    return resample(torch.from_numpy(np.ascontiguousarray(x, np.float32)), rate, RATE).numpy()


def speak(text: str, voice: str, speed: int = 160, pitch: int = 50) -> np.ndarray:
    """`text` spoken by espeak-ng's `voice` (e.g. "en-gb-scotland+f2") at `speed` words a minute and `pitch` (0-99)."""
    import soundfile as sf

    espeak = _need("espeak-ng")
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "speech.wav"
        subprocess.run([espeak, "-v", voice, "-s", str(speed), "-p", str(pitch), "-w", str(wav), text], check=True, capture_output=True)
        audio, rate = sf.read(wav, dtype="float32", always_2d=True)
    return fit(_resample(audio.mean(axis=1), rate))


def drum_samples(kits: Sequence[str] = tuple(KIT_LICENCES)) -> list[tuple[str, str, Path]]:
    """(kit, instrument name, sample file) of every sample layer of every instrument of `kits`, in file order."""
    out = []
    for kit in kits:
        xml = DRUMKITS / kit / "drumkit.xml"
        if not xml.is_file():
            raise PlatonicError(f"rendering the real_audio drums needs {xml}: {APT}")
        root = ET.parse(xml).getroot()
        ns = re.match(r"\{.*\}", root.tag)
        q = (lambda tag: f"{ns.group(0)}{tag}") if ns else (lambda tag: tag)  # noqa: E731
        for inst in root.iter(q("instrument")):
            name = (inst.findtext(q("name")) or "").strip()
            for file in [e.text for e in inst.iter(q("filename")) if e.text]:
                path = DRUMKITS / kit / file.strip()
                if path.is_file():
                    out.append((kit, name, path))
    return out


def drum_clip(path: Path) -> np.ndarray:
    """One drum sample as a clip (mixed to mono, resampled to 16 kHz)."""
    import soundfile as sf

    audio, rate = sf.read(path, dtype="float32", always_2d=True)
    return fit(_resample(audio.mean(axis=1), rate))
