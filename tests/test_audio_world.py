"""The synthetic audio world: synthesis checked against the spectrum, determinism, captions, tasks."""

from __future__ import annotations

import attrs
import numpy as np
import pytest

from platonic_sdk.data.audio import Waveform
from platonic_sdk.errors import PlatonicError
from platonic_sdk.worlds.audio import BRIGHT, MUFFLED, RAISED, TASK_SPECS, TIMBRE_NAMES, AudioWorld, noise, tone
from platonic_sdk.worlds.sounds import ENVELOPES, REGISTERS, TIMBRES, Sound, caption, synthesise

RATE = 8000


def _spectrum(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.fft.rfftfreq(x.size, 1 / RATE), np.abs(np.fft.rfft(x * np.hanning(x.size)))


def _band_db(freqs: np.ndarray, mag: np.ndarray, f: float, width: float = 15.0) -> float:
    band = (freqs > f - width) & (freqs < f + width)
    return 20 * np.log10(mag[band].max())


def test_a_whistle_is_a_pure_tone_at_its_pitch():
    x = synthesise(Sound("tone", timbre="whistle", f0=440.0, floor=0.0), np.random.default_rng(0))
    freqs, mag = _spectrum(x)
    assert abs(freqs[mag.argmax()] - 440.0) <= 1.0
    assert _band_db(freqs, mag, 440) - _band_db(freqs, mag, 880) > 40  # no second harmonic
    assert x.dtype == np.float32 and x.size == RATE and abs(np.abs(x).max() - 0.7) < 1e-3


def test_timbres_differ_in_their_partials_and_the_tilt_moves_them_by_its_slope():
    rng = np.random.default_rng(0)
    clarinet = synthesise(Sound("tone", timbre="clarinet", f0=200.0, floor=0.0), rng)
    freqs, mag = _spectrum(clarinet)
    assert _band_db(freqs, mag, 600) - _band_db(freqs, mag, 400) > 20  # odd harmonics only
    flat = synthesise(Sound("tone", timbre="horn", f0=200.0, floor=0.0), rng)
    tilted = synthesise(Sound("tone", timbre="horn", f0=200.0, floor=0.0, tilt=MUFFLED), rng)
    (f, m_flat), (_, m_tilt) = _spectrum(flat), _spectrum(tilted)
    # partials at 400 and 1600 Hz are two octaves apart: the tilt changes their level difference by 2 * tilt dB
    change = (_band_db(f, m_tilt, 1600) - _band_db(f, m_tilt, 400)) - (_band_db(f, m_flat, 1600) - _band_db(f, m_flat, 400))
    assert abs(change - 2 * MUFFLED) < 1.0


def test_noise_colours_have_their_spectral_slopes():
    slopes = {}
    for colour in ("white", "pink", "brown"):
        x = synthesise(Sound("noise", noise=colour, fill=1.0, floor=0.0, envelope="steady"), np.random.default_rng(1))
        freqs, mag = _spectrum(x)
        low = (freqs > 200) & (freqs < 400)
        high = (freqs > 1600) & (freqs < 3200)
        slopes[colour] = 10 * np.log10((mag[high] ** 2).mean() / (mag[low] ** 2).mean()) / 3.0  # dB per octave
    assert abs(slopes["white"]) < 1.0
    assert abs(slopes["pink"] + 3.0) < 1.0
    assert abs(slopes["brown"] + 6.0) < 1.0


def test_counts_glides_and_levels():
    rng = np.random.default_rng(2)
    x = synthesise(Sound("tone", count=3, fill=0.5, floor=0.0), rng)
    active = np.abs(x).reshape(100, -1).max(axis=1) > 0.05  # 10 ms frames
    onsets = np.flatnonzero(active[1:] & ~active[:-1]).size + int(active[0])
    assert onsets == 3
    rising = synthesise(Sound("tone", timbre="whistle", f0=300.0, glide=12.0, floor=0.0), rng)
    first, last = rising[: RATE // 8], rising[-RATE // 8 :]
    peak = lambda seg: np.fft.rfftfreq(seg.size, 1 / RATE)[np.abs(np.fft.rfft(seg)).argmax()]  # noqa: E731
    assert peak(first) < 360 and peak(last) > 500  # one octave up over the note
    quiet = synthesise(Sound("tone", gain=0.1, floor=0.0), rng)
    assert abs(np.abs(quiet).max() - 0.1) < 1e-3


def test_captions_name_only_true_attributes():
    world = AudioWorld(seed=3)
    for i in range(300):
        rng = world.rng("pretrain", i)
        sound = tone(rng) if i % 2 else noise(rng)
        words = set(caption(sound, rng).split())
        assert words
        if sound.kind == "noise":
            assert sound.noise in words and not words & set(TIMBRES)
        else:
            assert words & set(TIMBRES) <= {sound.timbre}
            assert words & set(REGISTERS) <= {sound.register}
            if "rising" in words:
                assert sound.glide > 0


def test_the_world_is_deterministic_and_streams_are_disjoint():
    a, b = AudioWorld(seed=0, train_per_class=3, test_per_class=2), AudioWorld(seed=0, train_per_class=3, test_per_class=2)
    clips_a, caps_a = a.corpus(20)
    clips_b, caps_b = b.corpus(20)
    assert caps_a == caps_b
    assert all(np.array_equal(clips_a[i].samples, clips_b[i].samples) for i in range(20))
    other, _ = AudioWorld(seed=1).corpus(20)
    assert not np.array_equal(other[0].samples, clips_a[0].samples)
    task = a.task("muffled_timbres")
    assert isinstance(task.train.items[0], Waveform) and task.train.items[0].sample_rate == 8000
    train = {task.train.items[i].samples.tobytes() for i in range(len(task.train))}
    assert not any(task.test.items[i].samples.tobytes() in train for i in range(len(task.test)))
    assert np.bincount(task.train.labels).tolist() == [3] * 6


def test_tasks_cover_the_study():
    world = AudioWorld()
    assert len(world.transfer_tasks) >= 4
    assert world.trio[2] not in world.transfer_tasks and set(world.trio[:2]) <= set(world.transfer_tasks)
    assert not set(world.controls) & set(world.transfer_tasks)
    spec = TASK_SPECS[world.trio[2]]
    assert spec.classnames == TASK_SPECS[world.trio[0]].classnames  # the held-out task shares the trio's labels
    # distinct label sets: tasks share class names only with tasks of the same attribute and shift
    label_sets = {TASK_SPECS[t].classnames for t in world.transfer_tasks}
    assert len(label_sets) >= 2
    assert all(not set(a) & set(b) for a in label_sets for b in label_sets if a != b)
    # controls read what no transfer task reads: no class name in common with any transfer task
    task_words = {cls for t in world.transfer_tasks for cls in TASK_SPECS[t].classnames}
    assert len(world.controls) >= 2
    assert all(not set(TASK_SPECS[c].classnames) & task_words for c in world.controls)
    _, captions = world.corpus(3000)
    vocabulary = {w for c in captions for w in c.split()}
    for name, spec in TASK_SPECS.items():
        for cls in spec.classnames:
            assert set(cls.split()) <= vocabulary, f"{name}: class {cls!r} never occurs in pretraining captions"
    with pytest.raises(PlatonicError, match="unknown task"):
        world.task("no_such_task")


def _peak(x: np.ndarray) -> float:
    freqs, mag = _spectrum(x)
    return float(freqs[mag.argmax()])


def test_the_shifts_move_pitch_and_spectral_slope_by_their_amounts():
    world = AudioWorld(seed=0, train_per_class=4, test_per_class=1)
    raised, plain = TASK_SPECS["raised_notes"].sampler, TASK_SPECS["clean_registers"].sampler
    for i in range(6):
        # the same generator state draws the same note; the raised task then transposes it by RAISED +- 1 semitones
        a, b = raised(np.random.default_rng(i), i % 3), plain(np.random.default_rng(i), i % 3)
        semis = 12 * np.log2(a.f0 / b.f0)
        assert abs(semis - RAISED) <= 1.0 and a.register == b.register and a.count == 1
        assert abs(12 * np.log2(_peak(synthesise(attrs.evolve(a, timbre="whistle", floor=0.0), np.random.default_rng(0))) / a.f0)) < 0.2
    for i in range(4):
        bright, flat = TASK_SPECS["bright_noises"].sampler(np.random.default_rng(i), 1), TASK_SPECS["clean_noises"].sampler(np.random.default_rng(i), 1)
        assert bright.noise == flat.noise == "pink" and abs(bright.tilt - BRIGHT) <= 1.0 and flat.tilt == 0.0
        muffled = TASK_SPECS["muffled_timbres"].sampler(np.random.default_rng(i), 2)
        assert muffled.timbre == "clarinet" and abs(muffled.tilt - MUFFLED) <= 1.0
    train = world.task("raised_melodies").train
    assert np.bincount(train.labels).tolist() == [4, 4, 4]


def test_controls_draw_clean_clips_of_their_label():
    for i in range(6):
        melody = TASK_SPECS["control_melody_timbres"].sampler(np.random.default_rng(i), i % 6)
        assert melody.timbre == TIMBRE_NAMES[i % 6] and 2 <= melody.count <= 4 and melody.tilt == 0.0 and melody.glide == 0.0
        burst = TASK_SPECS["control_noise_envelopes"].sampler(np.random.default_rng(i), i % 4)
        assert burst.kind == "noise" and burst.envelope == ENVELOPES[i % 4] and burst.tilt == 0.0 and burst.count == 1
