"""Original laion_clap checkpoints (optional extra `laion`): skipped unless laion_clap is importable.

Run in an environment with laion_clap (it pins numpy<2), e.g. HF_HUB_OFFLINE=1 python -m pytest tests/test_audio_laion.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import platonic_sdk as ps
from platonic_sdk.data.audio import Waveform
from platonic_sdk.edits.edit import OperatorEdit

laion_clap = pytest.importorskip("laion_clap")
from laion_clap.clap_module import create_model  # noqa: E402
from laion_clap.training.data import get_audio_features  # noqa: E402


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A random HTSAT-tiny + transformer laion_clap model saved as the released .pt files are ({"state_dict": module.*})."""
    torch.manual_seed(0)
    model, _ = create_model("HTSAT-tiny", "transformer", precision="fp32", device="cpu")
    path = tmp_path_factory.mktemp("laion") / "random.pt"
    torch.save({"epoch": 1, "state_dict": {"module." + k: v for k, v in model.state_dict().items()}}, path)
    return model.eval(), str(path)


def _clips() -> list[Waveform]:
    rng = np.random.default_rng(0)
    return [Waveform(0.5 * np.sin(2 * np.pi * 440 * np.arange(16000) / 16000), 16000),
            Waveform(0.2 * rng.standard_normal((2, 24000)), 48000)]


def test_pt_checkpoint_embeds_as_laion_clap_does(checkpoint):
    model, path = checkpoint
    enc = ps.load("clap-htsat-unfused", path)
    assert enc.modality == "audio" and enc.embed_dim == 512
    clips = _clips()
    with torch.no_grad():
        ours = enc.encode_media(enc.preprocess(clips)).double()
        # laion_clap's own path: mono 48 kHz, int16 quantisation, repeat-padding, its HTSAT + projection
        inputs = []
        for clip in clips:
            wave = clip.prepared(48000)
            wave = (np.clip(wave, -1, 1) * 32767.0).astype(np.int16).astype(np.float32) / 32767.0
            inputs.append(get_audio_features({}, torch.from_numpy(wave), 480000, "rand_trunc", "repeatpad",
                                             dict(vars(model.audio_cfg))))
        theirs = model.get_audio_embedding(inputs).double()
        text = enc.encode_text(["the sound of a dog"]).double()
        their_text = torch.nn.functional.normalize(
            model.encode_text(laion_clap.clap_module.tokenize(["the sound of a dog"]), device="cpu"), dim=-1).double()
    assert torch.allclose(ours, theirs, atol=1e-5)
    assert torch.allclose(text, their_text, atol=1e-5)


def test_fold_equals_forward_undo_and_folder_round_trip(checkpoint, tmp_path):
    _, path = checkpoint
    enc = ps.load("clap-htsat-unfused", path)
    batch = enc.preprocess(_clips()[:1])
    site = enc.last_affine()
    before = {k: v.clone() for k, v in site.tensors().items()}
    with torch.no_grad():
        s, z = site.site_inputs(enc, batch)
        A = torch.randn(512, 512, generator=torch.Generator().manual_seed(0)) / 512
        edit = OperatorEdit(A, strength=0.5).apply(enc)
        assert torch.allclose(enc.embed_media(batch).double(), z.double() + 0.5 * s.double() @ A.double().T, atol=1e-4)
        edit.remove()
    assert all(torch.equal(t, before[k]) for k, t in enc.last_affine().tensors().items())
    hits = [n for n, _ in enc.media_encoder.named_modules() if n.endswith(tuple(enc.lora_targets))]
    assert hits and all(isinstance(enc.media_encoder.get_submodule(n), torch.nn.Linear) for n in hits)
    enc.save(str(tmp_path / "saved"))
    back = ps.load("clap-htsat-unfused", str(tmp_path / "saved"))
    with torch.no_grad():
        assert torch.allclose(back.embed_media(batch), z, atol=1e-5)
    with pytest.raises(ps.CheckpointError):
        ps.load("clap-htsat-fused", str(tmp_path / "saved"))


def test_bad_checkpoints_are_refused(tmp_path):
    torch.save({"state_dict": {"nothing": torch.zeros(1)}}, tmp_path / "bad.pt")
    with pytest.raises(ps.CheckpointError, match="does not fit"):
        ps.load("clap-htsat-unfused", str(tmp_path / "bad.pt"), tmodel="transformer")
    with pytest.raises(ps.CheckpointError):  # RoBERTa towers (the released ones) need the hub or a local tokenizer
        ps.load("clap-htsat-unfused", str(tmp_path / "bad.pt"))
    with pytest.raises(ps.CheckpointError, match="no laion_clap checkpoint"):
        ps.load("clap-htsat-unfused", str(tmp_path / "missing.pt"))
