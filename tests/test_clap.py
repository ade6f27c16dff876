"""The CLAP audio families on tiny random-weight models: embeddings, folding, files, LoRA targets, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import platonic_sdk as ps
import platonic_sdk.data.audio as audio
from platonic_sdk.data.audio import Waveform, read_audio, write_audio
from platonic_sdk.edits.edit import OperatorEdit
from platonic_sdk.encoding.features import landmarks

AUDIO_FAMILIES = ("clap-htsat-unfused", "clap-htsat-fused", "clap-general", "clap-music")


def _clips(seed: int = 0) -> list[Waveform]:
    """A stereo 22.05 kHz clip, a short mono 16 kHz one, and one longer than the models' 1 s window."""
    rng = np.random.default_rng(seed)
    t = np.arange(22050) / 22050
    stereo = np.stack([np.sin(2 * np.pi * 440 * t), 0.5 * np.sin(2 * np.pi * 660 * t)])
    return [
        Waveform(stereo, 22050),
        Waveform(0.3 * rng.standard_normal(8000), 16000),
        Waveform(np.sin(2 * np.pi * 220 * np.arange(20000) / 8000), 8000),
    ]


@pytest.fixture(scope="module", params=AUDIO_FAMILIES)
def case(request):
    torch.manual_seed(0)
    return request.param, ps.from_config(request.param, seed=0)


def test_registry_lists_the_four_audio_families():
    assert set(AUDIO_FAMILIES) <= set(ps.list_families("audio"))
    assert ps.family("clap-htsat-unfused").default_checkpoint == "laion/clap-htsat-unfused"
    assert ps.family("clap-music").default_checkpoint == "laion/larger_clap_music"


def test_embeddings_have_the_protocol_shapes(case):
    family, enc = case
    assert enc.modality == "audio" and enc.family == family
    batch = enc.preprocess(_clips())
    with torch.no_grad():
        z, t = enc.embed_media(batch), enc.embed_text(["the sound of a flute.", "a dog"])
        f = enc.encode_media(batch)
    assert z.shape == (3, enc.embed_dim) and t.shape == (2, enc.embed_dim)
    assert torch.allclose(f.norm(dim=-1), torch.ones(3), atol=1e-5)
    # the fused family stacks four views and flags the clip longer than its window; the others crop it
    fused = family == "clap-htsat-fused"
    assert batch["input_features"].shape[1] == (4 if fused else 1)
    assert batch["is_longer"].ravel().tolist() == [False, False, fused]


def test_preprocess_is_deterministic_and_resamples_to_the_model_rate(case):
    _, enc = case
    clip = _clips()[0]
    at_rate = Waveform(clip.mono().resample(enc.sample_rate).samples, enc.sample_rate)
    a = enc.preprocess([clip, clip])["input_features"]
    b = enc.preprocess([at_rate])["input_features"]
    assert torch.equal(a[0], a[1])
    assert torch.allclose(a[0], b[0])
    long_clip = _clips()[2]
    assert torch.equal(enc.preprocess([long_clip])["input_features"], enc.preprocess([long_clip])["input_features"])


def test_a_long_clip_at_another_rate_is_resampled_and_cropped_as_by_hand(case, caplog):
    """A 2 s clip at 16 kHz embeds as the same clip resampled by torchaudio and cut to the model's first
    window by hand (a fused model reads it whole: resampled only); the log says what was done."""
    from torchaudio.functional import resample

    family, enc = case
    t = np.arange(32000) / 16000
    clip = Waveform(np.sin(2 * np.pi * 300 * t) * np.linspace(0.2, 1.0, t.size), 16000)
    rate = enc.feature_extractor.sampling_rate
    window = enc.feature_extractor.nb_max_samples
    by_hand = resample(torch.from_numpy(clip.samples), 16000, rate).numpy()
    fused = family == "clap-htsat-fused"
    if not fused:
        by_hand = by_hand[:window]
    assert by_hand.size == (2 * rate if fused else window)
    audio.NOTED.clear()  # said once per process: forget what earlier tests said
    with caplog.at_level("WARNING", logger="platonic_sdk.audio"), torch.no_grad():
        ours = enc.encode_media(enc.preprocess([clip]))
        again = enc.encode_media(enc.preprocess([clip]))
    np.random.seed(0)  # the fused model's views of a long clip are random crops (the adapter fixes the seed)
    native_input = enc.feature_extractor([by_hand], sampling_rate=rate, return_tensors="pt")
    with torch.no_grad():
        native = enc.model.get_audio_features(input_features=native_input["input_features"],
                                              is_longer=torch.tensor([[fused]])).pooler_output
    assert torch.allclose(ours, native, atol=1e-5)
    assert torch.equal(ours, again)
    notes = [r.getMessage() for r in caplog.records]
    assert any(f"resampled 16000 Hz audio to the model's {rate} Hz" in n for n in notes)
    assert any(("fusion views" if fused else "first 1 s") in n for n in notes)
    assert len(notes) == 2  # each note once


def test_fold_equals_forward_and_remove_restores(case):
    _, enc = case
    batch = enc.preprocess(_clips())
    site = enc.last_affine()
    assert site.kind == "projection" and site.bias is not None
    assert site.weight is enc.model.audio_projection.linear2.weight
    before = {k: v.detach().clone() for k, v in site.tensors().items()}
    with torch.no_grad():
        s, z = site.site_inputs(enc, batch)
    A = torch.randn(enc.embed_dim, enc.embed_dim, generator=torch.Generator().manual_seed(1)) / enc.embed_dim
    edit = OperatorEdit(A, strength=0.5).apply(enc)
    with torch.no_grad():
        z_edit = enc.embed_media(batch)
    expected = z.double() + 0.5 * s.double() @ A.double().T
    assert torch.allclose(z_edit.double(), expected, atol=1e-4)
    edit.remove()
    for name, tensor in enc.last_affine().tensors().items():
        assert torch.equal(tensor, before[name])


def test_bad_input_raises_and_changes_nothing(case):
    _, enc = case
    before = {k: v.detach().clone() for k, v in enc.last_affine().tensors().items()}
    with pytest.raises(ps.PlatonicError):
        enc.preprocess([np.zeros(100)])  # raw samples without a rate
    with pytest.raises(ps.PlatonicError):
        enc.preprocess([])
    with pytest.raises(ps.PlatonicError):
        enc.embed_text("a single string")
    with pytest.raises(ps.ShapeError):
        OperatorEdit(torch.zeros(enc.embed_dim + 1, enc.embed_dim + 1)).apply(enc)
    with pytest.raises(ps.NonFiniteError):
        OperatorEdit(torch.full((enc.embed_dim, enc.embed_dim), float("nan")))
    for name, tensor in enc.last_affine().tensors().items():
        assert torch.equal(tensor, before[name])


def test_lora_targets_name_the_htsat_query_and_value_projections(case):
    _, enc = case
    hits = [n for n, m in enc.media_encoder.named_modules() if n.endswith(tuple(enc.lora_targets))]
    assert hits and all(isinstance(enc.media_encoder.get_submodule(n), torch.nn.Linear) for n in hits)
    assert {n.rsplit(".", 1)[-1] for n in hits} == {"query", "value"}
    blocks = [n for n, _ in enc.media_encoder.named_modules() if n.endswith("attention.self")]
    assert len(hits) == 2 * len(blocks)


def test_save_and_load_round_trip(case, tmp_path):
    family, enc = case
    enc.save(str(tmp_path))
    assert json.loads((tmp_path / "platonic.json").read_text())["family"] == family
    back = ps.load(family, str(tmp_path))
    batch = enc.preprocess(_clips())
    with torch.no_grad():
        assert torch.allclose(back.embed_media(back.preprocess(_clips())), enc.embed_media(batch), atol=1e-5)
        assert torch.allclose(back.embed_text(["a flute"]), enc.embed_text(["a flute"]), atol=1e-5)
    assert back.sample_rate == enc.sample_rate


def test_a_folder_of_another_family_or_fusion_mode_is_refused(tmp_path):
    ps.from_config("clap-htsat-unfused").save(str(tmp_path / "unfused"))
    with pytest.raises(ps.CheckpointError):
        ps.load("clap-htsat-fused", str(tmp_path / "unfused"))
    with pytest.raises(ps.CheckpointError):
        ps.load("clap-general", str(tmp_path / "unfused"))
    with pytest.raises(ps.CheckpointError):
        ps.load("clap-music", str(tmp_path / "nowhere"))


def test_a_window_that_does_not_fold_into_htsat_is_refused():
    with pytest.raises(ps.PlatonicError, match="frames"):
        ps.from_config("clap-htsat-unfused", {"features": {"hop_length": 32}})


def test_wav_round_trip_through_the_loader_into_an_embedding(tmp_path):
    enc = ps.from_config("clap-htsat-unfused", seed=0)
    clip = _clips()[0]  # stereo, 22.05 kHz: the loader must mix down and resample to 8 kHz
    path = write_audio(tmp_path / "clip.wav", clip)
    read = read_audio(path)
    assert read.sample_rate == 22050 and read.samples.shape == clip.samples.shape
    assert np.abs(read.samples - clip.samples).max() < 1e-4  # 16-bit PCM
    with torch.no_grad():
        from_file = enc.encode_media(enc.preprocess([str(path)]))
        from_memory = enc.encode_media(enc.preprocess([clip]))
    assert torch.allclose(from_file, from_memory, atol=1e-3)
    g = landmarks(enc, [["the sound of a flute."], ["the sound of a bell."]])
    assert g.shape == (2, enc.embed_dim)


def test_a_fused_model_without_64_mel_bins_is_refused():
    with pytest.raises(ps.PlatonicError, match="64 mel bins"):
        ps.from_config("clap-htsat-fused", {"audio_config": {"num_mel_bins": 32}})


def test_a_clip_embeds_the_same_alone_and_in_a_batch(case):
    _, enc = case
    clips = _clips()
    with torch.no_grad():
        together = enc.embed_media(enc.preprocess(clips))
        alone = torch.cat([enc.embed_media(enc.preprocess([c])) for c in clips])
    assert torch.allclose(together, alone, atol=1e-4)


def test_audio_items_in_every_ecosystem_format_embed_alike(tmp_path):
    """Waveform, file path, HF datasets dict, (samples, rate) tuple and torch tensors are the same clip."""
    enc = ps.from_config("clap-htsat-unfused", seed=0)
    stereo = _clips()[0]
    path = write_audio(tmp_path / "clip.wav", stereo, subtype="FLOAT")
    items = [
        stereo,
        str(path),
        path,
        {"array": stereo.samples, "sampling_rate": 22050, "path": None},  # datasets' Audio feature
        (stereo.samples, 22050),
        (torch.from_numpy(stereo.samples), 22050.0),
        Waveform(torch.from_numpy(stereo.samples), 22050),
    ]
    with torch.no_grad():
        z = enc.encode_media(enc.preprocess(items))
    assert (z - z[0]).abs().max() <= 1e-6


def test_soundfile_layout_and_rateless_audio_are_refused_by_name():
    frames_by_channels = np.zeros((4000, 2), dtype=np.float32)  # soundfile.read's (frames, channels)
    with pytest.raises(ps.ShapeError, match=r"\(channels, n\).*4000 frames of 2 channels.*samples\.T"):
        Waveform(frames_by_channels, 8000)
    with pytest.raises(ps.ShapeError, match="samples.T"):
        ps.from_config("clap-htsat-unfused").preprocess([(frames_by_channels, 8000)])
    assert Waveform(frames_by_channels.T, 8000).mono().num_samples == 4000
    enc = ps.from_config("clap-htsat-unfused")
    with pytest.raises(ps.PlatonicError, match="no sample rate"):
        enc.preprocess([torch.zeros(100)])
    with pytest.raises(ps.PlatonicError, match="'array' and 'sampling_rate'"):
        enc.preprocess([{"audio": np.zeros(100)}])
