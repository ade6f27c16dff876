"""Every family embeds exactly as its native library does, through the path a user takes.

Checkpoints are written with the native libraries (tests/native_checkpoints.py), loaded with
`ps.load(family, folder)`, and compared with the library's own pipeline on images of several sizes,
aspect ratios and modes and on several texts: max |difference| of unit embeddings <= 1e-5 in fp32.
Then the other direction: what an encoder's `save` writes (the `--save-model` folder), after an edit is
folded in, loads in the native library alone and embeds as the edited encoder.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import platonic_sdk as ps
from platonic_sdk.data.audio import Waveform

import native_checkpoints as native

TOL = 1e-5

# case -> (family, writer, writer options, trained without a text mask)
HF_CASES = {
    "clip": ("clip", native.write_clip, {}, False),
    "clip-bilinear-no-crop": ("clip", native.write_clip, {"resample": 2, "do_center_crop": False,
                                                          "size": {"height": 32, "width": 32}}, False),
    "metaclip-vocab-files": ("metaclip", native.write_clip, {"tokenizer_layout": "vocab_files", "resample": 0,
                                                             "image_mean": [0.4, 0.5, 0.6]}, False),
    "siglip-sentencepiece": ("siglip", native.write_siglip, {}, True),
    "siglip-bilinear": ("siglip", native.write_siglip, {"resample": 2}, True),
    "siglip2-gemma": ("siglip2", native.write_siglip, {"tokenizer_layout": "gemma"}, True),
    "siglip2-siglip-sentencepiece": ("siglip2", native.write_siglip, {"tokenizer_layout": "siglip"}, True),
    "siglip2-gemma-sentencepiece": ("siglip2", native.write_siglip, {"tokenizer_layout": "gemma_sentencepiece"}, True),
    "siglip2-naflex": ("siglip2", native.write_siglip, {"tokenizer_layout": "gemma", "naflex": True}, True),
}
# case -> (family, model config, preprocess config, transformers tokenizer in the folder)
OPEN_CLIP_CASES = {
    "openclip-longest-bilinear": ("openclip", native.OPENCLIP_VIT,
                                  {"resize_mode": "longest", "interpolation": "bilinear", "fill_color": 7}, False),
    "openclip-squash-nonsquare": ("openclip", {**native.OPENCLIP_VIT, "vision_cfg": {
        **native.OPENCLIP_VIT["vision_cfg"], "image_size": [32, 48]}}, {"resize_mode": "squash",
                                                                       "mean": [0.5, 0.5, 0.5]}, False),
    "openclip-shortest-hf-tokenizer": ("openclip", native.OPENCLIP_VIT, {}, True),
    "evaclip": ("evaclip", native.EVA_TINY, {"resize_mode": "shortest"}, False),
}
CLAP_FAMILIES = sorted(native.CLAP_AUDIO)


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape and a.dtype == b.dtype == torch.float32
    return float((a - b).abs().max())


def _images() -> list:
    return list(native.image_items().values())


def _write_hf(case: str, folder: Path) -> tuple[str, bool]:
    family, write, options, no_mask = HF_CASES[case]
    write(folder, **options)
    return family, no_mask


def _write_open_clip(case: str, folder: Path) -> str:
    family, model_cfg, preprocess_cfg, hf_tokenizer = OPEN_CLIP_CASES[case]
    native.write_open_clip(folder, model_cfg, preprocess_cfg, hf_tokenizer=hf_tokenizer)
    return family


# -- native checkpoint -> ps.load -----------------------------------------------------------------
@pytest.mark.parametrize("case", sorted(HF_CASES))
def test_transformers_family_embeds_as_transformers(case, tmp_path):
    family, no_mask = _write_hf(case, tmp_path)
    enc = ps.load(family, str(tmp_path))
    images = _images()
    array, tensor = native.array_items()
    with torch.no_grad():
        assert max_diff(enc.encode_media(enc.preprocess(images)), native.native_hf_images(tmp_path, images)) <= TOL
        # arrays and CHW tensors: what the native processor gives for the same pixels
        ours = enc.encode_media(enc.preprocess([array, tensor]))
        assert max_diff(ours, native.native_hf_images(tmp_path, [array, tensor.permute(1, 2, 0).numpy()])) <= TOL
        assert max_diff(enc.encode_text(native.TEXTS), native.native_hf_texts(tmp_path, native.TEXTS, no_mask)) <= TOL


@pytest.mark.parametrize("case", sorted(OPEN_CLIP_CASES))
def test_open_clip_family_embeds_as_open_clip(case, tmp_path):
    family = _write_open_clip(case, tmp_path)
    enc = ps.load(family, str(tmp_path))
    images = _images()
    array, tensor = native.array_items()
    pil = [Image.fromarray(array), Image.fromarray(tensor.permute(1, 2, 0).numpy())]
    with torch.no_grad():
        image_ref, text_ref = native.native_open_clip(tmp_path, images + pil, native.TEXTS)
        assert max_diff(enc.encode_media(enc.preprocess(images + [array, tensor])), image_ref) <= TOL
        assert max_diff(enc.encode_text(native.TEXTS), text_ref) <= TOL


def _native_input(enc, waves):
    """What the native pipeline must be given to see what the adapter feeds the model: an unfused model's
    adapter cuts a long clip to its first window (the native extractor would take a random crop);
    a fused model reads it whole."""
    fmt = enc.input_format
    return [w[: fmt.window] if fmt.crop else w for w in waves]


@pytest.mark.parametrize("family", CLAP_FAMILIES)
def test_clap_family_embeds_as_transformers(family, tmp_path):
    native.write_clap(tmp_path, family)
    enc = ps.load(family, str(tmp_path))
    waves = native.clips()
    with torch.no_grad():
        audio_ref, text_ref = native.native_clap(tmp_path, _native_input(enc, waves), native.TEXTS)
        ours = enc.encode_media(enc.preprocess([Waveform(w, native.CLAP_RATE) for w in waves]))
        assert max_diff(ours, audio_ref) <= TOL
        assert max_diff(enc.encode_text(native.TEXTS), text_ref) <= TOL


def test_siglip_text_ignores_the_mask_that_transformers_5_returns(tmp_path):
    """The convention matters: with the processor's mask the SigLIP text embedding is another one."""
    family, _ = _write_hf("siglip-sentencepiece", tmp_path)
    enc = ps.load(family, str(tmp_path))
    with torch.no_grad():
        short = ["a red cat", "zebra"]  # padded: the mask hides the padding from the last position
        masked = native.native_hf_texts(tmp_path, short, trained_without_mask=False)
        assert max_diff(enc.encode_text(short), masked) > 1e-3


# -- encoder.save (the --save-model folder) -> native library -------------------------------------
def _fold_random_edit(enc) -> None:
    """Fold z -> z + 0.5 A s into the last affine, as every closed-form edit does."""
    site = enc.last_affine()
    A = torch.randn(site.out_dim, site.in_dim, generator=torch.Generator().manual_seed(0)) / site.in_dim
    site.fold(A, 0.5)


def _edited_and_saved(enc, folder: Path):
    _fold_random_edit(enc)
    enc.save(str(folder))
    return enc


@pytest.mark.parametrize("case", ["clip", "metaclip-vocab-files", "siglip-sentencepiece", "siglip2-gemma",
                                  "siglip2-naflex"])
def test_saved_transformers_checkpoint_loads_natively_as_edited(case, tmp_path):
    family, no_mask = _write_hf(case, tmp_path / "src")
    enc = _edited_and_saved(ps.load(family, str(tmp_path / "src")), tmp_path / "out")
    images = _images()
    with torch.no_grad():
        before = native.native_hf_images(tmp_path / "src", images)
        ours = enc.encode_media(enc.preprocess(images))
        assert max_diff(ours, native.native_hf_images(tmp_path / "out", images)) <= TOL
        assert max_diff(ours, before) > 1e-3  # the edit is in the saved weights
        assert max_diff(enc.encode_text(native.TEXTS), native.native_hf_texts(tmp_path / "out", native.TEXTS, no_mask)) <= TOL


@pytest.mark.parametrize("case", ["openclip-longest-bilinear", "openclip-shortest-hf-tokenizer", "evaclip"])
def test_saved_open_clip_checkpoint_loads_natively_as_edited(case, tmp_path):
    family = _write_open_clip(case, tmp_path / "src")
    enc = _edited_and_saved(ps.load(family, str(tmp_path / "src")), tmp_path / "out")
    images = _images()
    with torch.no_grad():
        image_ref, text_ref = native.native_open_clip(tmp_path / "out", images, native.TEXTS)
        assert max_diff(enc.encode_media(enc.preprocess(images)), image_ref) <= TOL
        assert max_diff(enc.encode_text(native.TEXTS), text_ref) <= TOL


@pytest.mark.parametrize("family", CLAP_FAMILIES)
def test_saved_clap_checkpoint_loads_natively_as_edited(family, tmp_path):
    native.write_clap(tmp_path / "src", family)
    enc = _edited_and_saved(ps.load(family, str(tmp_path / "src")), tmp_path / "out")
    waves = native.clips()
    with torch.no_grad():
        audio_ref, text_ref = native.native_clap(tmp_path / "out", _native_input(enc, waves), native.TEXTS)
        assert max_diff(enc.encode_media(enc.preprocess([Waveform(w, native.CLAP_RATE) for w in waves])), audio_ref) <= TOL
        assert max_diff(enc.encode_text(native.TEXTS), text_ref) <= TOL


# case -> (family, config, whether the native text pipeline reads the saved tokenizer as it was built)
FROM_CONFIG_CASES = {
    "clip": ("clip", None, True),
    "metaclip": ("metaclip", None, True),
    "siglip": ("siglip", None, True),
    "siglip2-fixed": ("siglip2", {"model_type": "siglip"}, True),
    # transformers reads the tokenizer of every model_type "siglip2" folder as a Siglip2Tokenizer (Gemma
    # pipeline), whatever the folder holds: natively only the media tower of a NaFlex model built on another
    # tokenizer is the same (docs/user_guide.md, Families).
    "siglip2-naflex": ("siglip2", None, False),
    "openclip": ("openclip", None, True),
}


@pytest.mark.parametrize("case", sorted(FROM_CONFIG_CASES))
def test_from_config_checkpoint_loads_natively(case, tmp_path):
    """Random-weight models (how the shipped zoo was built) save folders the native library reads too."""
    family, config, text_is_native = FROM_CONFIG_CASES[case]
    enc = _edited_and_saved(ps.from_config(family, config), tmp_path)
    images = _images()
    with torch.no_grad():
        ours_images, ours_texts = enc.encode_media(enc.preprocess(images)), enc.encode_text(native.TEXTS)
        if family == "openclip":
            image_ref, text_ref = native.native_open_clip(tmp_path, images, native.TEXTS)
        else:
            image_ref = native.native_hf_images(tmp_path, images)
            text_ref = native.native_hf_texts(tmp_path, native.TEXTS, trained_without_mask=family.startswith("siglip"))
    assert max_diff(ours_images, image_ref) <= TOL
    assert (max_diff(ours_texts, text_ref) <= TOL) == text_is_native


def test_open_clip_folder_with_an_unnamed_tokenizer_is_refused(tmp_path):
    """Tokenizer files that open_clip would ignore (no text_cfg.hf_tokenizer_name) are a loud error, not a silent BPE."""
    import json

    _write_open_clip("openclip-shortest-hf-tokenizer", tmp_path)
    config = json.loads((tmp_path / "open_clip_config.json").read_text())
    del config["model_cfg"]["text_cfg"]["hf_tokenizer_name"]
    (tmp_path / "open_clip_config.json").write_text(json.dumps(config))
    with pytest.raises(ps.CheckpointError, match="hf_tokenizer_name"):
        ps.load("openclip", str(tmp_path))


def test_near_empty_tokenizer_fails_loudly(tmp_path):
    """An offline load that returns an almost empty vocabulary (e.g. GemmaTokenizer(vocab_file=...)) is refused."""
    from transformers import GemmaTokenizer

    native.write_siglip(tmp_path, tokenizer_layout="gemma")
    (tmp_path / "spm").mkdir()
    native.write_gemma_sentencepiece(tmp_path / "spm")
    tiny = GemmaTokenizer(vocab_file=str(tmp_path / "spm" / "tokenizer.model"))
    assert len(tiny) < 10  # the trap itself
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / name).unlink()
    tiny.save_pretrained(tmp_path)
    with pytest.raises(ps.CheckpointError, match="almost empty vocabulary"):
        ps.load("siglip2", str(tmp_path))


def test_images_in_an_unsupported_mode_are_refused():
    enc = ps.from_config("clip")
    with pytest.raises(ps.PlatonicError, match="mode 'I;16'"):
        enc.preprocess([Image.fromarray(np.zeros((8, 8), dtype=np.uint16))])
    with pytest.raises(ps.PlatonicError, match="uint8"):
        enc.preprocess([np.zeros((8, 8, 3), dtype=np.float32)])
    with pytest.raises(ps.PlatonicError, match="channels-last"):
        enc.preprocess([np.zeros((3, 8, 9), dtype=np.uint8)])
