"""The vision family adapters on tiny random-weight models: embeddings, files, the foldable site, LoRA targets."""

import copy
import json
import os

import numpy as np
import pytest
import torch
from PIL import Image
from transformers import PreTrainedModel

import platonic_sdk as ps
from platonic_sdk.adapters._text import check_vocab, train_tokenizer
from platonic_sdk.errors import CheckpointError, UnknownFamilyError

# (family, config): siglip2 runs in both of its layouts.
CASES = [
    ("clip", None),
    ("metaclip", None),
    ("openclip", None),
    ("siglip", None),
    ("siglip2", None),
    ("siglip2", {"model_type": "siglip"}),
    ("evaclip", None),
]
IDS = ["clip", "metaclip", "openclip", "siglip", "siglip2-naflex", "siglip2-fixed", "evaclip"]
TEXTS = ["a small red circle", "a large blue square on a dark background", "zebra"]


def _images(n: int, seed: int, size: tuple[int, int] = (32, 32)) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, size=(*size, 3), dtype=np.uint8) for _ in range(n)]


@pytest.fixture(scope="module", params=CASES, ids=IDS)
def case(request, caption_tokenizer):
    family, config = request.param
    encoder = ps.from_config(family, config, tokenizer=caption_tokenizer, seed=0)
    return family, encoder


FIXED = [(c, i) for c, i in zip(CASES, IDS) if i != "siglip2-naflex"]  # NaFlex input is patchified, not a fixed-size image


@pytest.fixture(scope="module", params=[c for c, _ in FIXED], ids=[i for _, i in FIXED])
def fixed_case(request, caption_tokenizer):
    family, config = request.param
    return family, ps.from_config(family, config, tokenizer=caption_tokenizer, seed=0)


def test_all_vision_families_are_registered():
    assert {"clip", "metaclip", "openclip", "siglip", "siglip2", "evaclip"} <= set(ps.list_families("image"))


def test_embeddings_have_the_joint_width_and_unit_norm(case):
    family, enc = case
    batch = enc.preprocess(_images(3, 0, size=(40, 28)))  # non-square: resized to the model's input
    f, g = enc.encode_media(batch), enc.encode_text(TEXTS)
    assert f.shape == (3, enc.embed_dim) and g.shape == (3, enc.embed_dim)
    torch.testing.assert_close(f.norm(dim=1), torch.ones(3))
    torch.testing.assert_close(g.norm(dim=1), torch.ones(3))
    assert enc.modality == "image" and enc.family == family
    # distinct inputs give distinct embeddings (nothing collapsed to a constant)
    assert torch.cdist(f, f)[0, 1:].min() > 1e-4 and torch.cdist(g, g)[0, 1:].min() > 1e-4


def test_embeddings_follow_grad_mode(case):
    _, enc = case
    batch = enc.preprocess(_images(2, 1))
    assert enc.embed_media(batch).requires_grad and enc.embed_text(TEXTS[:1]).requires_grad
    with torch.no_grad():
        assert not enc.embed_media(batch).requires_grad and not enc.embed_text(TEXTS[:1]).requires_grad


def test_pil_and_array_inputs_agree(case):
    _, enc = case
    arrays = _images(2, 2)
    from_arrays, from_pil = enc.preprocess(arrays), enc.preprocess([Image.fromarray(a) for a in arrays])
    if isinstance(from_arrays, dict):
        assert from_arrays.keys() == from_pil.keys()
        assert all(torch.equal(from_arrays[k], from_pil[k]) for k in from_arrays)
    else:
        assert torch.equal(from_arrays, from_pil)


def _size_and_statistics(enc) -> tuple[int, tuple, tuple]:
    """Input size, mean and std of a fixed-resolution encoder's preprocessing (open_clip or transformers)."""
    images = enc.images
    if hasattr(images, "cfg"):
        size = images.cfg.size
        return (size if isinstance(size, int) else size[0]), images.cfg.mean, images.cfg.std
    return enc.model.config.vision_config.image_size, images.processor.image_mean, images.processor.image_std


def test_fixed_size_preprocessing_is_normalisation_at_the_model_size(fixed_case):
    """An image already at the input size is only rescaled and normalised: (x / 255 - mean) / std."""
    _, enc = fixed_case
    size, mean, std = _size_and_statistics(enc)
    image = _images(1, 3, size=(size, size))[0]
    expected = (torch.tensor(image).permute(2, 0, 1).float() / 255 - torch.tensor(mean)[:, None, None]) / (
        torch.tensor(std)[:, None, None]
    )
    torch.testing.assert_close(enc.preprocess([image])[0], expected)


def test_save_then_load_gives_identical_embeddings(case, tmp_path):
    family, enc = case
    enc.save(str(tmp_path))
    back = ps.load(family, str(tmp_path))
    batch = enc.preprocess(_images(3, 4))
    with torch.no_grad():
        assert torch.equal(back.embed_media(back.preprocess(_images(3, 4))), enc.embed_media(batch))
        assert torch.equal(back.embed_text(TEXTS), enc.embed_text(TEXTS))
    assert back.lora_targets == enc.lora_targets and back.embed_dim == enc.embed_dim


def test_fold_equals_forward_and_snapshot_restores_bits(case):
    """Folding A at alpha changes the raw embedding to z + alpha * s A^T; restoring the snapshot undoes it exactly."""
    _, enc = case
    batch = enc.preprocess(_images(4, 5))
    site = enc.last_affine()
    with torch.no_grad():
        s, z = site.site_inputs(enc, batch)
    assert s.shape == (4, site.in_dim) and z.shape == (4, enc.embed_dim) == (4, site.out_dim)
    if site.kind == "projection":
        assert torch.equal(s, z)
    else:  # residual head: s = [u; 1]
        assert torch.equal(s[:, -1], torch.ones(4))
    A = 0.1 * torch.randn(site.out_dim, site.in_dim, generator=torch.Generator().manual_seed(0))
    alpha = 0.7
    before = copy.deepcopy(enc.model.state_dict())
    snapshot = {k: v.detach().clone() for k, v in site.tensors().items()}
    site.fold(A, alpha)
    with torch.no_grad():
        edited = enc.embed_media(batch)
    expected = (z.double() + alpha * s.double() @ A.double().T).float()
    assert float((edited - expected).norm() / expected.norm()) < 1e-5
    after = enc.model.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and len(changed) <= 2  # only the site's weight (and bias)
    with torch.no_grad():
        for name, tensor in site.tensors().items():
            tensor.copy_(snapshot[name])
        restored = enc.embed_media(batch)
    assert all(torch.equal(before[k], v) for k, v in enc.model.state_dict().items())
    assert torch.equal(restored, z)


def test_lora_targets_are_the_media_towers_q_and_v(case):
    from peft import LoraConfig, inject_adapter_in_model
    from peft.tuners.lora import LoraLayer

    _, enc = case
    tower = copy.deepcopy(enc.media_encoder)
    wrapped = inject_adapter_in_model(LoraConfig(r=2, target_modules=enc.lora_targets), tower)
    names = [name for name, module in wrapped.named_modules() if isinstance(module, LoraLayer)]
    q = [n for n in names if n.endswith(enc.lora_targets[0])]
    v = [n for n in names if n.endswith(enc.lora_targets[1])]
    assert len(q) == len(v) >= 2 and len(q) + len(v) == len(names)  # one q and one v per block
    assert all("q" in n.rsplit(".", 1)[-1] for n in q) and all("v" in n.rsplit(".", 1)[-1] for n in v)
    with torch.no_grad():  # LoRA's B starts at zero: the wrapped tower computes what the original did
        x = enc.preprocess(_images(2, 6))
        ref = enc.media_encoder(**x) if isinstance(x, dict) else enc.media_encoder(x)
        out = wrapped(**x) if isinstance(x, dict) else wrapped(x)
    ref, out = (getattr(t, "pooler_output", t) for t in (ref, out))
    torch.testing.assert_close(out, ref)


def test_a_folder_of_another_family_is_refused(case, tmp_path):
    family, enc = case
    enc.save(str(tmp_path))
    for other in ("clip", "metaclip", "openclip", "siglip", "siglip2", "evaclip"):
        if other != family:
            with pytest.raises(CheckpointError):
                ps.load(other, str(tmp_path))


def test_missing_path_and_corrupt_weights_raise_checkpoint_error(case, tmp_path):
    family, enc = case
    with pytest.raises(CheckpointError, match="no checkpoint"):
        ps.load(family, str(tmp_path / "nowhere"))
    enc.save(str(tmp_path))
    (weights,) = [f for f in os.listdir(tmp_path) if f.endswith(".safetensors")]
    data = (tmp_path / weights).read_bytes()
    (tmp_path / weights).write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError):
        ps.load(family, str(tmp_path))
    (tmp_path / weights).unlink()
    with pytest.raises(CheckpointError):
        ps.load(family, str(tmp_path))


def test_hub_checkpoints_fail_fast_offline():
    """Offline (HF_HUB_OFFLINE=1, set in conftest) a hub id is a CheckpointError, not a hang."""
    for name in ("clip", "siglip", "siglip2", "openclip"):
        with pytest.raises(CheckpointError):
            ps.load(name)


def test_unknown_family():
    with pytest.raises(UnknownFamilyError, match="known families"):
        ps.load("not-a-family", "x")


def test_trained_tokenizer_wraps_captions_in_bos_eos(caption_tokenizer):
    ids = caption_tokenizer(["a small red circle"])["input_ids"][0]
    vocab = caption_tokenizer.get_vocab()
    assert ids == [vocab["<bos>"], vocab["a"], vocab["small"], vocab["red"], vocab["circle"], vocab["<eos>"]]
    assert caption_tokenizer(["zebra"])["input_ids"][0][1] == vocab["<unk>"]
    assert caption_tokenizer.model_max_length == 16 and vocab["<eos>"] != 2  # CLIP's legacy eos id
    bpe = train_tokenizer(["abc abd abe"] * 5, vocab_size=40, kind="bpe")
    assert bpe.decode(bpe("abd")["input_ids"], skip_special_tokens=True) == "abd"


def test_a_tokenizer_far_smaller_than_the_text_tower_is_refused(caption_tokenizer, tmp_path):
    """The offline trap: a tokenizer class that silently comes back with a handful of tokens."""
    tiny = train_tokenizer(["a b"], vocab_size=10)
    with pytest.raises(CheckpointError, match="tokens"):
        check_vocab(tiny, 49408, "hub")
    enc = ps.from_config("clip", tokenizer=caption_tokenizer)
    enc.save(str(tmp_path))
    tiny.save_pretrained(str(tmp_path))  # overwrite the folder's tokenizer with a 6-token one
    with pytest.raises(CheckpointError, match="tokens"):
        ps.load("clip", str(tmp_path))
    marker = json.loads((tmp_path / "platonic.json").read_text())
    assert marker["family"] == "clip"


def test_embeddings_equal_the_librarys_own_forward(case):
    """The adapter's f and g are what the wrapped model's own forward returns (normalised)."""
    _, enc = case
    batch = enc.preprocess(_images(2, 7))
    with torch.no_grad():
        if isinstance(enc.model, PreTrainedModel):
            inputs = dict(enc.tokenize(TEXTS))
            inputs.update(batch if isinstance(batch, dict) else {"pixel_values": batch})
            out = enc.model(**inputs)
            image_ref, text_ref = out.image_embeds, out.text_embeds
        else:  # open_clip: (image_features, text_features, logit_scale, ...)
            image_ref, text_ref = enc.model(batch, enc.tokenize(TEXTS))[:2]
        torch.testing.assert_close(enc.encode_media(batch), image_ref)
        torch.testing.assert_close(enc.encode_text(TEXTS), text_ref)


def test_text_embedding_is_read_at_the_end_of_the_caption(case, caption_tokenizer):
    """Pooling sits at <eos> / the last position, not at the highest token id (open_clip's default)."""
    _, enc = case
    vocab = caption_tokenizer.get_vocab()
    top = max(vocab, key=vocab.get)
    assert not top.startswith("<")
    with torch.no_grad():
        a, b = enc.embed_text([f"{top} red", f"{top} blue"])
    assert (a - b).norm() > 1e-4 * a.norm()


def test_openclip_folders_are_open_clips_own_format(caption_tokenizer, tmp_path):
    """open_clip itself reads a saved openclip folder (`local-dir:`) and computes the same embeddings."""
    import open_clip

    enc = ps.from_config("openclip", tokenizer=caption_tokenizer)
    enc.save(str(tmp_path))
    reference = open_clip.create_model(f"local-dir:{tmp_path}").eval()
    batch = enc.preprocess(_images(2, 8))
    ids = enc.tokenize(TEXTS)
    with torch.no_grad():
        torch.testing.assert_close(enc.embed_media(batch), reference.encode_image(batch))
        torch.testing.assert_close(enc.embed_text(TEXTS), reference.encode_text(ids))


def test_openclip_model_name_with_weights_file(tmp_path):
    """load("NAME", pretrained=file) goes through open_clip.create_model and its bundled BPE tokenizer."""
    import open_clip
    from safetensors.torch import save_file

    name = "platonic-test-vit-tiny"
    cfg = {
        "embed_dim": 32,
        "vision_cfg": {"image_size": 32, "patch_size": 8, "width": 32, "layers": 2, "head_width": 16},
        "text_cfg": {"context_length": 16, "width": 32, "heads": 2, "layers": 1},
    }
    (tmp_path / f"{name}.json").write_text(json.dumps(cfg))
    open_clip.add_model_config(tmp_path / f"{name}.json")
    torch.manual_seed(0)
    reference = open_clip.create_model(name).eval()
    save_file(reference.state_dict(), str(tmp_path / "weights.safetensors"))
    enc = ps.load("openclip", name, pretrained=str(tmp_path / "weights.safetensors"))
    batch = enc.preprocess(_images(2, 9))
    with torch.no_grad():
        torch.testing.assert_close(enc.embed_media(batch), reference.encode_image(batch))
        ids = open_clip.get_tokenizer(name)(TEXTS, context_length=16)
        torch.testing.assert_close(enc.embed_text(TEXTS), reference.encode_text(ids))
    with pytest.raises(CheckpointError, match="names no weights"):
        ps.load("openclip", name)
    with pytest.raises(CheckpointError, match="no pretrained tag"):
        ps.load("openclip", f"{name}:no-such-tag")
    with pytest.raises(CheckpointError, match="no weights file"):
        ps.load("openclip", name, pretrained=str(tmp_path / "missing.safetensors"))
    with pytest.raises(CheckpointError, match="not an open_clip EVA"):
        ps.load("evaclip", name, pretrained=str(tmp_path / "weights.safetensors"))


# Sizes the synthetic worlds train from scratch: patch 4, wider and deeper towers, a joint width of 96.
CUSTOM = {
    "clip": {"projection_dim": 96, "vision_config": {"patch_size": 4, "hidden_size": 128, "num_hidden_layers": 3}},
    "metaclip": {"projection_dim": 96, "vision_config": {"patch_size": 4, "hidden_size": 128, "num_hidden_layers": 3}},
    "openclip": {"embed_dim": 96, "vision_cfg": {"patch_size": 4, "width": 128, "layers": 3}},
    "siglip": {"vision_config": {"patch_size": 4, "hidden_size": 96, "num_hidden_layers": 3}},
    "siglip2": {"vision_config": {"patch_size": 4, "num_patches": 64, "hidden_size": 96, "num_hidden_layers": 3}},
    "evaclip": {"embed_dim": 96, "timm_kwargs": {"patch_size": 4, "embed_dim": 128, "depth": 3}},
}


@pytest.mark.parametrize("family", sorted(CUSTOM))
def test_custom_sizes_build_what_they_ask_for(family, caption_tokenizer, tmp_path):
    enc = ps.from_config(family, CUSTOM[family], tokenizer=caption_tokenizer, seed=1)
    assert enc.embed_dim == 96
    q_projs = [n for n, _ in enc.media_encoder.named_modules() if n.endswith(enc.lora_targets[0])]
    assert len(q_projs) == 3
    batch = enc.preprocess(_images(2, 10))
    assert enc.encode_media(batch).shape == enc.encode_text(TEXTS[:2]).shape == (2, 96)
    enc.save(str(tmp_path))
    with torch.no_grad():
        assert torch.equal(ps.load(family, str(tmp_path)).embed_media(batch), enc.embed_media(batch))


@pytest.mark.parametrize("family,config", [("clip", None), ("siglip", None), ("siglip2", None)])
def test_plain_transformers_folders_load(family, config, caption_tokenizer, tmp_path):
    """A folder written by transformers alone (no platonic.json, no preprocessor config) loads with the family's
    default preprocessing; a plain SigLIP folder also loads as siglip2 (fixed-resolution SigLIP2 is a SiglipModel)."""
    enc = ps.from_config(family, config, tokenizer=caption_tokenizer)
    enc.model.save_pretrained(str(tmp_path))
    caption_tokenizer.save_pretrained(str(tmp_path))
    batch = enc.preprocess(_images(2, 11))
    for name in (family, "siglip2") if family == "siglip" else (family,):
        back = ps.load(name, str(tmp_path))
        assert back.family == name and type(back.images) is type(enc.images)
        with torch.no_grad():
            assert torch.equal(back.embed_media(back.preprocess(_images(2, 11))), enc.embed_media(batch))


def test_open_clip_attention_split_raises_when_it_replaces_nothing():
    """The LoRA routes rely on open_clip's blocks using nn.MultiheadAttention; without one the split says so."""
    from platonic_sdk.adapters.openclip import split_attention

    enc = ps.from_config("openclip")
    before = {k: v.clone() for k, v in enc.model.state_dict().items()}
    with pytest.raises(ps.PlatonicError, match="no nn.MultiheadAttention"):
        split_attention(enc.media_encoder)  # already split: nothing left to replace
    assert all(torch.equal(v, before[k]) for k, v in enc.model.state_dict().items())
