"""Audio items and datasets: waveforms, file reading (soundfile), resampling, folder and CSV-manifest tasks.

A task's items are `Waveform`s or paths to audio files; an audio family's `preprocess` turns either into
mono samples at its own rate with `as_waveform(item).prepared(rate)`. Folder and manifest tasks hold
`AudioFile` references, read when a batch is encoded, so a dataset of thousands of clips costs no memory.
"""

from __future__ import annotations

import io
import logging
import os
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import attrs
import numpy as np

from ..errors import LayoutError, PlatonicError, ShapeError
from ..items import FileRef, Items
from ..tasks import Split, Task
from .folders import check_class_names, check_files, read_table, scan_classes, stratified_split, subfolders

AUDIO_TEMPLATE = "this is a sound of {}."
log = logging.getLogger("platonic_sdk.audio")
NOTED: set[str] = set()  # the input notes this process has logged (each names the rate and window it is about)
AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".aiff", ".aif", ".mp3")


def _samples(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor, on any device
        value = value.detach().cpu().numpy()
    return np.asarray(value, dtype=np.float32)


@attrs.frozen(eq=False)
class Waveform:
    """Audio samples at `sample_rate` Hz: shape (n,) for mono or (channels, n)."""

    samples: np.ndarray = attrs.field(converter=_samples)
    sample_rate: int = attrs.field(converter=int)

    def __attrs_post_init__(self) -> None:
        if self.samples.ndim not in (1, 2):
            raise ShapeError(f"waveform samples must be (n,) or (channels, n), got shape {self.samples.shape}")
        if self.samples.ndim == 2 and self.samples.shape[0] > self.samples.shape[1]:
            channels, frames = self.samples.shape[1], self.samples.shape[0]
            raise ShapeError(
                f"waveform samples of shape {self.samples.shape} would be {self.samples.shape[0]} channels of "
                f"{self.samples.shape[1]} samples; Waveform takes (channels, n). For soundfile's (frames, channels) "
                f"layout ({frames} frames of {channels} channels here) pass samples.T"
            )
        if self.samples.size == 0 or self.samples.shape[-1] == 0:
            raise ShapeError("waveform has no samples")
        if not np.isfinite(self.samples).all():
            raise PlatonicError("waveform contains NaN/inf samples")
        if self.sample_rate <= 0:
            raise PlatonicError(f"sample rate must be positive, got {self.sample_rate}")

    @property
    def num_samples(self) -> int:
        return int(self.samples.shape[-1])

    @property
    def duration(self) -> float:
        """Length in seconds."""
        return self.num_samples / self.sample_rate

    def mono(self) -> "Waveform":
        """Mixdown: the mean over channels."""
        if self.samples.ndim == 1:
            return self
        return Waveform(self.samples.mean(axis=0), self.sample_rate)

    def resample(self, rate: int) -> "Waveform":
        """Band-limited (sinc) resampling to `rate` Hz with torchaudio."""
        rate = int(rate)
        if rate == self.sample_rate:
            return self
        if rate <= 0:
            raise PlatonicError(f"target sample rate must be positive, got {rate}")
        import torch
        from torchaudio.functional import resample

        out = resample(torch.from_numpy(np.ascontiguousarray(self.samples)), self.sample_rate, rate)
        return Waveform(out.numpy(), rate)

    def prepared(self, rate: int) -> np.ndarray:
        """Mono float32 samples at `rate` Hz: what a model's feature extractor takes."""
        return self.mono().resample(rate).samples


@attrs.define
class InputFormat:
    """A model's audio input: mono at `rate` Hz in a window of `window` samples. Longer clips are cropped
    to their first window unless `crop` is False (a fused model reads a long clip whole, through its
    fusion views); shorter ones are left to the model's own padding. What each conversion did is noted
    once per process in the `platonic_sdk.audio` log (`NOTED`; a warning: a resample loses what lies above
    the model's Nyquist frequency, a crop what lies past the window), however many models, fine-tunes and
    edited copies read audio of that format."""

    rate: int
    window: int
    crop: bool = True

    def fit(self, item: Any) -> np.ndarray:
        """`item` as mono float32 samples at the model's rate, cropped to the window (when it crops)."""
        wave = as_waveform(item)
        samples = wave.prepared(self.rate)
        seconds = self.window / self.rate
        if wave.sample_rate != self.rate:
            self._note(f"resampled {wave.sample_rate} Hz audio to the model's {self.rate} Hz (it hears nothing above {self.rate // 2} Hz)")
        if samples.size > self.window:
            self._note(f"cropped clips longer than the model's {seconds:g} s window to their first {seconds:g} s" if self.crop
                       else f"read clips longer than the model's {seconds:g} s window through its fusion views")
            if self.crop:
                samples = samples[: self.window]
        elif samples.size < self.window:
            self._note(f"clips shorter than the model's {seconds:g} s window are padded by the model's feature extractor")
        return samples

    @staticmethod
    def _note(message: str) -> None:
        if message not in NOTED:
            NOTED.add(message)
            log.warning("audio input: %s", message)


def wav_header_frames(handle: IO[bytes]) -> int | None:
    """Frames a RIFF/WAVE file's header promises (data chunk size / block align); None for other files.

    None too when the writer left the size open (0 or 0xFFFFFFFF, as streaming writers do). Reads
    `handle` from its start and leaves it at its start.
    """
    handle.seek(0)
    try:
        head = handle.read(12)
        if len(head) < 12 or head[:4] not in (b"RIFF", b"RIFX") or head[8:12] != b"WAVE":
            return None
        order = "<" if head[:4] == b"RIFF" else ">"
        block_align = 0
        while len(chunk := handle.read(8)) == 8:
            kind, size = chunk[:4], struct.unpack(order + "I", chunk[4:])[0]
            if kind == b"data":
                return size // block_align if block_align and size not in (0, 0xFFFFFFFF) else None
            body = handle.read(size + (size & 1))
            if kind == b"fmt " and len(body) >= 14:
                block_align = struct.unpack(order + "H", body[12:14])[0]
        return None
    finally:
        handle.seek(0)


def decode_audio(handle: IO[bytes] | bytes, name: str) -> Waveform:
    """Decode an audio file's bytes (an open binary file, or bytes) with soundfile; `name` names it in errors.

    An unreadable, empty or truncated file raises PlatonicError. Truncated: fewer frames than the header
    promises (a WAV's data chunk size, any format's frame count).
    """
    import soundfile

    handle = io.BytesIO(handle) if isinstance(handle, (bytes, bytearray)) else handle
    try:
        promised = wav_header_frames(handle)
        with soundfile.SoundFile(handle) as sound:
            promised = promised or sound.frames
            data, rate = sound.read(dtype="float32", always_2d=True), sound.samplerate
    except (soundfile.LibsndfileError, RuntimeError, TypeError, struct.error) as exc:
        raise PlatonicError(f"cannot read audio file {name!r}: {exc}") from None
    if data.shape[0] == 0:
        raise PlatonicError(f"audio file {name!r} holds no samples")
    if data.shape[0] < promised:
        raise PlatonicError(f"audio file {name!r} is truncated: its header promises {promised} frames, it holds {data.shape[0]}")
    samples = data[:, 0] if data.shape[1] == 1 else data.T
    return Waveform(samples, rate)


def read_audio(path: str | os.PathLike) -> Waveform:
    """Read an audio file with soundfile (see `decode_audio`); a missing file raises PlatonicError."""
    path = Path(path)
    if not path.is_file():
        raise PlatonicError(f"audio file {str(path)!r} does not exist")
    with path.open("rb") as handle:
        return decode_audio(handle, str(path))


def write_audio(path: str | os.PathLike, waveform: Waveform, subtype: str = "PCM_16") -> Path:
    """Write `waveform` to `path` (format from the suffix, e.g. .wav or .flac) with soundfile."""
    import soundfile

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = waveform.samples if waveform.samples.ndim == 1 else waveform.samples.T
    soundfile.write(str(path), data, waveform.sample_rate, subtype=subtype)
    return path


def as_waveform(item: Any) -> Waveform:
    """An audio item as a Waveform. Items: a `Waveform`; a path to an audio file; a Hugging Face `datasets`
    audio dict {"array", "sampling_rate"}; an (samples, rate) pair. Samples (numpy arrays or torch tensors)
    are (n,) or (channels, n); a bare array or tensor is refused, since it carries no sample rate."""
    if isinstance(item, Waveform):
        return item
    if isinstance(item, (str, os.PathLike)):
        return read_audio(item)
    if isinstance(item, dict):
        if "array" not in item or "sampling_rate" not in item:
            raise PlatonicError(
                f"an audio dict needs the keys 'array' and 'sampling_rate' (as Hugging Face datasets' Audio "
                f"feature gives), got {sorted(item)}"
            )
        return Waveform(item["array"], item["sampling_rate"])
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], (int, float, np.number)):
        return Waveform(*item)
    bare = " (a bare array has no sample rate: pass (samples, rate))" if hasattr(item, "shape") else ""
    raise PlatonicError(
        f"audio items are Waveform objects, paths to audio files, {{'array', 'sampling_rate'}} dicts or "
        f"(samples, rate) tuples, got {type(item).__name__}{bare}"
    )


class AudioFile(FileRef):
    """An audio file, read to a Waveform on demand."""

    def load(self) -> Waveform:
        return read_audio(self.path)


def audio_files(paths: Sequence[str | os.PathLike], verify: bool = True) -> Items:
    """References to audio files; `verify` reads each header now (soundfile.info), so that every unreadable
    file is refused, all in one error, when the dataset is loaded (samples are read when an item is indexed)."""
    if verify:
        check_files(paths, _readable, "audio files")
    return Items([AudioFile(p) for p in paths])


def _readable(path: str | os.PathLike) -> None:
    import soundfile

    try:
        info = soundfile.info(str(path))
    except (soundfile.LibsndfileError, RuntimeError, TypeError, OSError) as exc:
        raise PlatonicError(f"cannot read audio file {str(path)!r}: {' '.join(str(exc).split())}") from None
    if info.frames == 0:
        raise PlatonicError(f"audio file {str(path)!r} holds no samples")


def _task(name: str, classnames: Sequence[str], paths: Sequence[str], labels: np.ndarray,
          train_ids: np.ndarray, test_ids: np.ndarray, templates: Sequence[str]) -> Task:
    split = Split(audio_files(paths), labels)
    return Task(name, classnames, split.subset(train_ids), split.subset(test_ids), templates)


def folder_task(
    root: str | os.PathLike,
    name: str | None = None,
    templates: Sequence[str] = (AUDIO_TEMPLATE,),
    test_fraction: float = 0.2,
    seed: int = 0,
) -> Task:
    """A task from a class-per-folder tree root/<class>/<clip>.wav; a seeded per-class train/test split."""
    root = Path(root)
    if not root.is_dir():
        raise PlatonicError(f"audio folder {str(root)!r} does not exist")
    classes = subfolders(root)
    names = check_class_names(classes, str(root))
    paths, labels = scan_classes(root, classes, AUDIO_SUFFIXES)
    if not paths:
        raise PlatonicError(f"no audio files ({', '.join(AUDIO_SUFFIXES)}) under {str(root)!r}/<class>/")
    train_ids, test_ids = stratified_split(labels, test_fraction, seed, [str(root / c) for c in classes])
    return _task(name or root.name, names, [str(p) for p in paths], labels, train_ids, test_ids, templates)


def manifest_task(
    manifest: str | os.PathLike,
    name: str | None = None,
    root: str | os.PathLike | None = None,
    test_folds: Sequence[int | str] | None = None,
    path_column: str = "path",
    label_column: str = "label",
    fold_column: str = "fold",
    path_template: str | None = None,
    templates: Sequence[str] = (AUDIO_TEMPLATE,),
) -> Task:
    """A task from a CSV manifest with one row per clip (ESC-50 / UrbanSound8K layout); folds never straddle.

    Rows whose fold is in `test_folds` (default: the last fold in sorted order) form the test split,
    all others the train split. A clip's path is `root / path_template.format(**row)` (default: the
    path column), e.g. ESC-50: path_column="filename", label_column="category", root="audio";
    UrbanSound8K: path_template="fold{fold}/{slice_file_name}", label_column="class", root="audio".
    Class names are the sorted distinct labels.
    """
    table = read_table(manifest, root, path_template or "{" + path_column + "}", label_column, (fold_column,))
    folds = [row[fold_column].strip() for row in table.rows]
    fold_names = sorted(set(folds), key=lambda f: (len(f), f))
    chosen = {str(f) for f in test_folds} if test_folds is not None else {fold_names[-1]}
    unknown = chosen - set(fold_names)
    if unknown:
        raise PlatonicError(f"test fold(s) {sorted(unknown)} not in the manifest's folds {fold_names}")
    if chosen == set(fold_names):
        raise PlatonicError("every fold is a test fold: the train split would be empty")
    is_test = np.asarray([f in chosen for f in folds])
    return _task(name or Path(manifest).stem, table.classnames, table.paths, table.labels, np.flatnonzero(~is_test), np.flatnonzero(is_test), templates)


ESC50_LAYOUT = "DIR/meta/esc50.csv (columns filename, fold, category) with the clips in DIR/audio/"
URBANSOUND8K_LAYOUT = "DIR/metadata/UrbanSound8K.csv (columns slice_file_name, fold, class) with the clips in DIR/audio/fold<N>/"


def _layout_manifest(root: str | os.PathLike, manifest: str, audio: str, layout: str) -> tuple[Path, Path]:
    root = Path(root)
    if not (root / manifest).is_file() or not (root / audio).is_dir():
        raise LayoutError(f"{str(root)!r} is not in the expected layout: {layout}")
    return root / manifest, root / audio


def esc50_task(
    root: str | os.PathLike, name: str = "esc50", test_folds: Sequence[int] = (5,), templates: Sequence[str] = (AUDIO_TEMPLATE,)
) -> Task:
    """ESC-50 as released (its 5 folds; fold 5 is the test split by default)."""
    manifest, audio = _layout_manifest(root, "meta/esc50.csv", "audio", ESC50_LAYOUT)
    return manifest_task(manifest, name, audio, test_folds, path_column="filename", label_column="category", templates=templates)


def urbansound8k_task(
    root: str | os.PathLike, name: str = "urbansound8k", test_folds: Sequence[int] = (10,), templates: Sequence[str] = (AUDIO_TEMPLATE,)
) -> Task:
    """UrbanSound8K as released (its 10 folds; fold 10 is the test split by default)."""
    manifest, audio = _layout_manifest(root, "metadata/UrbanSound8K.csv", "audio", URBANSOUND8K_LAYOUT)
    return manifest_task(manifest, name, audio, test_folds, label_column="class", path_template="fold{fold}/{slice_file_name}", templates=templates)
