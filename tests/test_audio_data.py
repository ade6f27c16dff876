"""Audio data: Waveform, soundfile reading, resampling, mixdown, folder and CSV-manifest tasks with folds."""

from __future__ import annotations

import csv
import wave

import numpy as np
import pytest

import platonic_sdk.data.audio as audio
from platonic_sdk.data.audio import AUDIO_TEMPLATE, InputFormat, Waveform, as_waveform, folder_task, manifest_task, read_audio, write_audio
from platonic_sdk.errors import PlatonicError, ShapeError


def _tone(freq: float, rate: int, seconds: float = 0.25) -> np.ndarray:
    return (0.5 * np.sin(2 * np.pi * freq * np.arange(int(rate * seconds)) / rate)).astype(np.float32)


def _peak_hz(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples))
    return float(np.fft.rfftfreq(samples.size, 1 / rate)[spectrum.argmax()])


def test_mixdown_is_the_channel_mean():
    left, right = _tone(440, 8000), _tone(880, 8000)
    mono = Waveform(np.stack([left, right]), 8000).mono()
    assert mono.samples.shape == left.shape
    np.testing.assert_allclose(mono.samples, (left + right) / 2, atol=1e-7)


def test_resampling_keeps_the_pitch_and_the_duration():
    wave_ = Waveform(_tone(440, 22050, 0.5), 22050).resample(8000)
    assert wave_.sample_rate == 8000 and wave_.num_samples == 4000
    assert abs(_peak_hz(wave_.samples, 8000) - 440) <= 2.0
    assert wave_.prepared(8000) is wave_.samples


def test_stdlib_wave_file_reads_back_with_its_rate_and_channels(tmp_path):
    rate = 11025
    left, right = _tone(300, rate), _tone(500, rate)
    pcm = (np.stack([left, right], axis=1) * 32767).astype("<i2")
    with wave.open(str(tmp_path / "x.wav"), "wb") as fh:
        fh.setnchannels(2)
        fh.setsampwidth(2)
        fh.setframerate(rate)
        fh.writeframes(pcm.tobytes())
    read = read_audio(tmp_path / "x.wav")
    assert read.sample_rate == rate and read.samples.shape == (2, left.size)
    np.testing.assert_allclose(read.samples[1], right, atol=1e-4)
    at_8k = read.prepared(8000)
    assert at_8k.ndim == 1 and at_8k.size == round(left.size * 8000 / rate)


def test_flac_round_trip(tmp_path):
    clip = Waveform(_tone(1000, 16000), 16000)
    back = read_audio(write_audio(tmp_path / "a.flac", clip))
    np.testing.assert_allclose(back.samples, clip.samples, atol=1e-4)


def test_bad_files_and_items_name_the_problem(tmp_path):
    with pytest.raises(PlatonicError, match="does not exist"):
        read_audio(tmp_path / "missing.wav")
    (tmp_path / "junk.wav").write_bytes(b"not audio at all")
    with pytest.raises(PlatonicError, match="cannot read"):
        read_audio(tmp_path / "junk.wav")
    with wave.open(str(tmp_path / "empty.wav"), "wb") as fh:
        fh.setnchannels(1)
        fh.setsampwidth(2)
        fh.setframerate(8000)
    with pytest.raises(PlatonicError, match="no samples"):
        read_audio(tmp_path / "empty.wav")
    with pytest.raises(PlatonicError, match="Waveform"):
        as_waveform(np.zeros(10))
    with pytest.raises(ShapeError):
        Waveform(np.zeros((2, 3, 4)), 8000)
    with pytest.raises(PlatonicError):
        Waveform(np.array([0.0, np.nan]), 8000)
    with pytest.raises(PlatonicError):
        Waveform(np.zeros(4), 0)


def _write_tree(root, classes, per_class, rate=8000):
    paths = {}
    for c, name in enumerate(classes):
        for i in range(per_class):
            path = root / name / f"{i}.wav"
            write_audio(path, Waveform(_tone(200 + 100 * c + i, rate, 0.1), rate))
            paths.setdefault(name, []).append(path)
    return paths


def test_folder_task_splits_each_class_and_keeps_paths_lazy(tmp_path):
    _write_tree(tmp_path / "sounds", ["dog_bark", "rain"], 5)
    (tmp_path / "sounds" / "rain" / "notes.txt").write_text("ignored")
    task = folder_task(tmp_path / "sounds", test_fraction=0.4, seed=3)
    assert task.classnames == ("dog bark", "rain") and task.templates == (AUDIO_TEMPLATE,)
    assert len(task.train) == 6 and len(task.test) == 4
    assert sorted(np.bincount(task.test.labels).tolist()) == [2, 2]
    assert not set(task.train.items.paths) & set(task.test.items.paths)
    for path, item, label in zip(task.test.items.paths, task.test.items, task.test.labels):
        assert f"/{['dog_bark', 'rain'][label]}/" in path
        np.testing.assert_array_equal(item.samples, read_audio(path).samples)  # references read on demand
    assert folder_task(tmp_path / "sounds", test_fraction=0.4, seed=3).test.items.paths == task.test.items.paths
    with pytest.raises(PlatonicError):
        folder_task(tmp_path / "nothing-here")


def _write_manifest(tmp_path, rows, header=("path", "label", "fold")):
    with (tmp_path / "meta.csv").open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    return tmp_path / "meta.csv"


def test_manifest_task_respects_folds(tmp_path):
    rows = []
    for fold in range(1, 6):
        for label in ("dog", "rooster", "rain"):
            name = f"{fold}-{label}.wav"
            write_audio(tmp_path / "audio" / name, Waveform(_tone(300 + fold, 8000, 0.1), 8000))
            rows.append((name, label, fold))
    manifest = _write_manifest(tmp_path, rows)
    task = manifest_task(manifest, root=tmp_path / "audio")
    assert task.name == "meta" and task.classnames == ("dog", "rain", "rooster")
    assert len(task.test) == 3 and all(p.endswith(tuple(f"5-{c}.wav" for c in ("dog", "rain", "rooster"))) for p in task.test.items.paths)
    assert len(task.train) == 12 and not any("/5-" in p for p in task.train.items.paths)
    two = manifest_task(manifest, root=tmp_path / "audio", test_folds=[1, 2])
    folds_of = lambda items: {int(p.rsplit("/", 1)[1].split("-")[0]) for p in items}  # noqa: E731
    assert folds_of(two.test.items.paths) == {1, 2} and folds_of(two.train.items.paths) == {3, 4, 5}
    for path, item, label in zip(two.test.items.paths, two.test.items, two.test.labels):
        assert path.endswith(f"-{two.classnames[label]}.wav")
        assert item.sample_rate == 8000
    with pytest.raises(PlatonicError, match="not in the manifest"):
        manifest_task(manifest, root=tmp_path / "audio", test_folds=[9])
    with pytest.raises(PlatonicError, match="train split would be empty"):
        manifest_task(manifest, root=tmp_path / "audio", test_folds=[1, 2, 3, 4, 5])


def test_manifest_path_template_reads_the_urbansound8k_layout(tmp_path):
    rows = [(f"{i}.wav", "siren" if i % 2 else "drilling", 1 + i % 3) for i in range(6)]
    manifest = _write_manifest(tmp_path, rows, header=("slice_file_name", "class", "fold"))
    for name, _, fold in rows:  # the layout's files (every header is read at load)
        (tmp_path / "audio" / f"fold{fold}").mkdir(parents=True, exist_ok=True)
        write_audio(tmp_path / "audio" / f"fold{fold}" / name, Waveform(_tone(300 + fold, 8000, 0.1), 8000))
    task = manifest_task(manifest, root=tmp_path / "audio", path_template="fold{fold}/{slice_file_name}",
                         label_column="class", test_folds=["3"])
    assert all(p.startswith(str(tmp_path / "audio" / "fold3")) for p in task.test.items.paths)
    with pytest.raises(PlatonicError, match="no column 'category'"):
        manifest_task(manifest, label_column="category")


def test_an_input_note_is_logged_once_per_process(caplog):
    """A model, its fine-tunes and edited copies each hold an input format: a short clip is noted once in a run, and
    a clip another format pads gets its own note."""
    audio.NOTED.clear()
    short = Waveform(np.zeros(800, np.float32), 8000)
    with caplog.at_level("WARNING", logger="platonic_sdk.audio"):
        for copy in [InputFormat(8000, 8000) for _ in range(12)]:
            assert copy.fit(short).shape == (800,)
        InputFormat(8000, 16000).fit(short)
    notes = [r.getMessage() for r in caplog.records]
    assert notes == ["audio input: clips shorter than the model's 1 s window are padded by the model's feature extractor",
                     "audio input: clips shorter than the model's 2 s window are padded by the model's feature extractor"]
