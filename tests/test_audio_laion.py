"""Original laion_clap checkpoints (optional extra `laion`) of the four CLAP families, checked against laion_clap's own model.

laion_clap pins numpy<2, so these tests run in their own environment: the README's test command makes
`.venv-laion` (the `laion` extra and pytest) and runs this file there, HF_HUB_OFFLINE=1. In the main
environment (no laion_clap) the module is skipped.

Each family gets a random-weight laion_clap model built offline with `create_model` (its CLIP-like
'transformer' text tower with the bundled BPE: the released RoBERTa towers need the hub), saved as the
released .pt files are, and loaded with `ps.load(family, path)`:

- clap-htsat-unfused: HTSAT-tiny; clap-htsat-fused: HTSAT-tiny with feature fusion ('aff_2d', as
  laion_clap's CLAP_Module builds it): a clip longer than the 10 s window goes through the fusion views;
- clap-general, clap-music: HTSAT-base (the families' default `amodel`).
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import platonic_sdk as ps
from platonic_sdk.data.audio import Waveform
from platonic_sdk.edits.edit import OperatorEdit

laion_clap = pytest.importorskip("laion_clap")
from laion_clap.clap_module import create_model, tokenize  # noqa: E402
from laion_clap.training.data import get_audio_features  # noqa: E402

# family: (laion_clap audio model, feature fusion), as the released checkpoints were built
FAMILIES = {
    "clap-htsat-unfused": ("HTSAT-tiny", False),
    "clap-htsat-fused": ("HTSAT-tiny", True),
    "clap-general": ("HTSAT-base", False),
    "clap-music": ("HTSAT-base", False),
}
TEXTS = ["the sound of a dog", "a violin playing a slow melody over rain"]


@pytest.fixture(scope="module", params=list(FAMILIES))
def checkpoint(request, tmp_path_factory):
    """(family, laion_clap model in eval mode, path of its .pt file: {"epoch", "state_dict": {"module." + key}})."""
    family = request.param
    amodel, fused = FAMILIES[family]
    torch.manual_seed(0)
    model, _ = create_model(amodel, "transformer", precision="fp32", device="cpu", enable_fusion=fused, fusion_type="aff_2d")
    state = {"module." + k: v for k, v in model.state_dict().items()}
    # The released files were saved with transformers < 4.31, whose text towers kept this buffer;
    # laion_clap's own loader deletes it (clap_module.factory.load_state_dict), and so must ours.
    state["module.text_branch.embeddings.position_ids"] = torch.arange(514)[None]
    path = tmp_path_factory.mktemp(family) / f"{family}.pt"
    torch.save({"epoch": 1, "state_dict": state}, path)
    return family, model.eval(), str(path)


@pytest.fixture(scope="module")
def encoder(checkpoint):
    """The .pt file loaded with `ps.load(family, path)` (the family's default `amodel`; `tmodel` read off the weights)."""
    family, _, path = checkpoint
    return ps.load(family, path)


def _clips() -> list[Waveform]:
    """A 1 s tone at 16 kHz, 0.5 s of stereo noise at 48 kHz, and 11 s at 8 kHz (longer than the 10 s window)."""
    rng = np.random.default_rng(0)
    t = np.arange(88000) / 8000
    return [Waveform(0.5 * np.sin(2 * np.pi * 440 * np.arange(16000) / 16000), 16000),
            Waveform(0.2 * rng.standard_normal((2, 24000)), 48000),
            Waveform(0.3 * np.sin(2 * np.pi * (200 + 40 * t) * t) + 0.05 * rng.standard_normal(t.size), 8000)]


def _their_audio_embedding(model, clips: list[Waveform], fused: bool):
    """laion_clap's own path: mono 48 kHz, int16 quantisation, its get_audio_features (repeat-padding; fusion
    views for a fused model, its random crops drawn after seeding `random` and numpy with 0, as the adapter
    does), then its get_audio_embedding (HTSAT + projection, unit norm). An unfused model gets a long clip's
    first window: the SDK's documented crop, where laion_clap would crop at random."""
    cfg = dict(vars(model.audio_cfg))
    window = int(cfg["clip_samples"])
    random.seed(0)
    np.random.seed(0)
    inputs = []
    for clip in clips:
        wave = clip.prepared(48000)
        if not fused:
            wave = wave[:window]
        wave = (np.clip(wave, -1, 1) * 32767.0).astype(np.int16).astype(np.float32) / 32767.0
        inputs.append(get_audio_features({}, torch.from_numpy(wave), window, "fusion" if fused else "rand_trunc",
                                         "repeatpad", cfg))
    return inputs, model.get_audio_embedding(inputs)


def test_pt_checkpoint_embeds_as_laion_clap_does(checkpoint, encoder):
    family, model, _ = checkpoint
    amodel, fused = FAMILIES[family]
    enc = encoder
    assert enc.modality == "audio" and enc.embed_dim == 512 and enc.options == {"amodel": amodel, "tmodel": "transformer", "fused": fused}
    clips = _clips()
    with torch.no_grad():
        batch = enc.preprocess(clips)
        ours = enc.encode_media(batch).double()
        inputs, theirs = _their_audio_embedding(model, clips, fused)
        text = enc.encode_text(TEXTS).double()
        their_text = torch.nn.functional.normalize(model.encode_text(tokenize(TEXTS), device="cpu"), dim=-1).double()
    assert ours.shape == theirs.shape == (3, 512)
    assert torch.allclose(ours, theirs.double(), atol=1e-5), (ours - theirs).abs().max()
    assert torch.allclose(text, their_text, atol=1e-5), (text - their_text).abs().max()
    if fused:  # the long clip went through the fusion views (a 4-view mel, flagged longer), the short ones did not
        assert batch["mel_fusion"].shape[1] == 4 and batch["longer"].flatten().tolist() == [False, False, True]
        assert [bool(x["longer"]) for x in inputs] == [False, False, True]
    else:
        assert "mel_fusion" not in batch
    # A clip embeds the same alone as in a batch (the fused model's crops are seeded per batch, not per clip:
    # the long clip is the only one that draws).
    with torch.no_grad():
        alone = enc.encode_media(enc.preprocess(clips[2:])).double()
    assert torch.allclose(alone, ours[2:], atol=1e-5)


def test_fold_equals_forward_undo_and_folder_round_trip(checkpoint, encoder, tmp_path):
    family = checkpoint[0]
    fused = FAMILIES[family][1]
    enc = encoder
    batch = enc.preprocess(_clips()[:1])
    site = enc.last_affine()
    before = {k: v.clone() for k, v in site.tensors().items()}
    with torch.no_grad():
        s, z = site.site_inputs(enc, batch)
        d = enc.embed_dim
        A = torch.randn(d, d, generator=torch.Generator().manual_seed(0)) / d
        edit = OperatorEdit(A, strength=0.5).apply(enc)
        assert torch.allclose(enc.embed_media(batch).double(), z.double() + 0.5 * s.double() @ A.double().T, atol=1e-4)
        edit.remove()
    assert all(torch.equal(t, before[k]) for k, t in enc.last_affine().tensors().items())
    hits = [n for n, _ in enc.media_encoder.named_modules() if n.endswith(tuple(enc.lora_targets))]
    assert hits and all(isinstance(enc.media_encoder.get_submodule(n), torch.nn.Linear) for n in hits)
    enc.save(str(tmp_path / "saved"))
    back = ps.load(family, str(tmp_path / "saved"))
    assert back.options == enc.options
    with torch.no_grad():
        assert torch.allclose(back.embed_media(batch), z, atol=1e-5)
    with pytest.raises(ps.CheckpointError):  # the other fusion mode is refused
        ps.load("clap-htsat-unfused" if fused else "clap-htsat-fused", str(tmp_path / "saved"))


def test_bad_checkpoints_are_refused(tmp_path):
    torch.save({"state_dict": {"nothing": torch.zeros(1)}}, tmp_path / "bad.pt")
    with pytest.raises(ps.CheckpointError, match="does not fit"):
        ps.load("clap-htsat-unfused", str(tmp_path / "bad.pt"), tmodel="transformer")
    with pytest.raises(ps.CheckpointError):  # RoBERTa towers (the released ones) need the hub or a local tokenizer
        ps.load("clap-htsat-unfused", str(tmp_path / "bad.pt"))
    with pytest.raises(ps.CheckpointError, match="no laion_clap checkpoint"):
        ps.load("clap-htsat-unfused", str(tmp_path / "missing.pt"))
