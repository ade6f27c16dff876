"""Tiny checkpoints written and read back with the native libraries only (no platonic_sdk import here).

Each writer saves a folder the way its library writes one (transformers `save_pretrained` of model and
processor, open_clip's local-dir layout, CLAP's processor folder); each `native_*` function embeds items
through that library's own documented pipeline. tests/test_parity.py compares these with `ps.load`.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from PIL import Image
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from torch.nn import functional as F

CORPUS = [
    f"a photo of a {colour} {thing}, number {i}!"
    for colour in ("red", "green", "blue", "yellow", "black", "white", "Violet")
    for thing in ("cat", "dog", "car", "circle", "square", "glyph")
    for i in range(4)
]
TEXTS = [
    "a photo of a red cat",
    "  A Photo   of a BLUE square!  ",
    "yellow glyph, number 3",
    "a photo of a white dog " * 6,  # longer than every context: truncated
    "zebra",  # out of the training vocabulary
]
CONTEXT = 16
TINY_VIT = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2}


def seed(n: int = 0) -> None:
    torch.manual_seed(n)


# -- images ---------------------------------------------------------------------------------------
def image_items() -> dict[str, Any]:
    """Images smaller and larger than a 32 px input, portrait and landscape, in every supported layout."""
    rng = np.random.default_rng(0)

    def rgb(h: int, w: int) -> np.ndarray:
        return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)

    rgba = np.concatenate([rgb(25, 37), rng.integers(0, 256, (25, 37, 1), dtype=np.uint8)], axis=-1)
    palette = Image.fromarray(rgb(30, 30)).convert("P", palette=Image.Palette.ADAPTIVE, colors=16)
    return {
        "portrait_large": Image.fromarray(rgb(70, 30)),
        "landscape_small": Image.fromarray(rgb(12, 27)),
        "square_at_size": Image.fromarray(rgb(32, 32)),
        "wide_large": Image.fromarray(rgb(33, 90)),
        "grey": Image.fromarray(rgb(40, 50)[..., 0], "L"),
        "rgba": Image.fromarray(rgba, "RGBA"),
        "palette": palette,
    }


def array_items() -> tuple[np.ndarray, torch.Tensor]:
    """An H x W x 3 uint8 array and a 3 x H x W uint8 tensor (portrait and landscape)."""
    rng = np.random.default_rng(1)
    return rng.integers(0, 256, (45, 21, 3), dtype=np.uint8), torch.from_numpy(rng.integers(0, 256, (3, 19, 52), dtype=np.uint8))


# -- tokenizers -----------------------------------------------------------------------------------
def _bpe(special: list[str], pre: Any, suffix: str | None = None, alphabet: list[str] = ()) -> tuple[dict, list]:
    suffix_option = {"end_of_word_suffix": suffix} if suffix else {}
    tok = Tokenizer(models.BPE(**suffix_option))
    tok.pre_tokenizer = pre
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=special, initial_alphabet=list(alphabet), **suffix_option)
    tok.train_from_iterator([t.lower() for t in CORPUS] + CORPUS, trainer)
    merges = [tuple(m) for m in json.loads(tok.to_str())["model"]["merges"]]
    return tok.get_vocab(), merges


def clip_tokenizer() -> Any:
    """A CLIPTokenizer (byte-level BPE with </w> word ends, as OpenAI's)."""
    from transformers import CLIPTokenizer

    byte = pre_tokenizers.ByteLevel(add_prefix_space=False)
    vocab, merges = _bpe(["<|startoftext|>", "<|endoftext|>"], byte, "</w>", pre_tokenizers.ByteLevel.alphabet())
    return CLIPTokenizer(vocab=vocab, merges=merges, model_max_length=CONTEXT)


def write_clip_vocab_files(folder: Path) -> None:
    """The legacy CLIP tokenizer layout: vocab.json + merges.txt (no tokenizer.json)."""
    byte = pre_tokenizers.ByteLevel(add_prefix_space=False)
    vocab, merges = _bpe(["<|startoftext|>", "<|endoftext|>"], byte, "</w>", pre_tokenizers.ByteLevel.alphabet())
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "CLIPTokenizer",
                                                              "model_max_length": CONTEXT}))


def roberta_tokenizer() -> Any:
    from transformers import RobertaTokenizer

    vocab, merges = _bpe(["<s>", "<pad>", "</s>", "<unk>", "<mask>"], pre_tokenizers.ByteLevel(add_prefix_space=False),
                         alphabet=pre_tokenizers.ByteLevel.alphabet())
    return RobertaTokenizer(vocab=vocab, merges=merges, model_max_length=CONTEXT)


def gemma_tokenizer() -> Any:
    """A GemmaTokenizer (tokenizer.json layout, as the SigLIP2 checkpoints ship)."""
    from transformers import GemmaTokenizer

    vocab, merges = _bpe(["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"], pre_tokenizers.Metaspace())
    return GemmaTokenizer(vocab=vocab, merges=merges, model_max_length=CONTEXT)


def _sentencepiece(model_type: str, **ids: int) -> bytes:
    import sentencepiece

    out = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(CORPUS), model_writer=out, vocab_size=200,
                                             model_type=model_type, hard_vocab_limit=False, minloglevel=2, **ids)
    return out.getvalue()


def siglip_tokenizer(folder: Path) -> Any:
    """A SentencePiece SiglipTokenizer (spiece.model, as SigLIP ships); pad = eos = </s>."""
    from transformers import SiglipTokenizer

    (folder / "spiece.model").write_bytes(_sentencepiece("unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1))
    return SiglipTokenizer(vocab_file=str(folder / "spiece.model"), model_max_length=CONTEXT)


def write_gemma_sentencepiece(folder: Path) -> None:
    """The legacy Gemma layout: a SentencePiece tokenizer.model + tokenizer_config.json."""
    (folder / "tokenizer.model").write_bytes(_sentencepiece("bpe", pad_id=0, eos_id=1, bos_id=2, unk_id=3))
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "GemmaTokenizer",
                                                              "model_max_length": CONTEXT}))


def _text_ids(tokenizer: Any) -> dict[str, Any]:
    return {"vocab_size": len(tokenizer), "pad_token_id": tokenizer.pad_token_id,
            "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id}


# -- transformers image-text folders --------------------------------------------------------------
def write_clip(folder: Path, tokenizer_layout: str = "clip", **processor: Any) -> None:
    """CLIPModel + CLIPProcessor (CLIPImageProcessor with `processor` options) via save_pretrained."""
    from transformers import AutoTokenizer, CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor

    folder.mkdir(parents=True, exist_ok=True)
    if tokenizer_layout == "vocab_files":
        write_clip_vocab_files(folder)
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
    else:
        tokenizer = clip_tokenizer()
    config = CLIPConfig(projection_dim=24, vision_config={**TINY_VIT, "image_size": 32, "patch_size": 8},
                        text_config={**TINY_VIT, "max_position_embeddings": CONTEXT, **_text_ids(tokenizer)})
    seed()
    CLIPModel(config).save_pretrained(folder)
    options = {"size": {"shortest_edge": 36}, "crop_size": {"height": 32, "width": 32}, **processor}
    CLIPProcessor(image_processor=CLIPImageProcessor(**options), tokenizer=tokenizer).save_pretrained(folder)


def write_siglip(folder: Path, tokenizer_layout: str = "siglip", naflex: bool = False, **processor: Any) -> None:
    """SiglipModel (fixed resolution) or Siglip2Model (NaFlex) + its processor via save_pretrained."""
    from transformers import (AutoTokenizer, Siglip2Config, Siglip2ImageProcessor, Siglip2Model, Siglip2Processor,
                              SiglipConfig, SiglipImageProcessor, SiglipModel, SiglipProcessor)

    folder.mkdir(parents=True, exist_ok=True)
    if tokenizer_layout == "siglip":
        tokenizer = siglip_tokenizer(folder)
    elif tokenizer_layout == "gemma":
        tokenizer = gemma_tokenizer()
    else:  # "gemma_sentencepiece"
        write_gemma_sentencepiece(folder)
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
    text = {**TINY_VIT, "max_position_embeddings": CONTEXT, "projection_size": 32, **_text_ids(tokenizer)}
    seed()
    if naflex:
        # Siglip2Processor calls its image processor with patch_size 16 and max_num_patches 256 whatever the
        # saved config says (the released checkpoints' values), so the tiny tower uses those too.
        config = Siglip2Config(vision_config={**TINY_VIT, "patch_size": 16, "num_patches": 256}, text_config=text)
        Siglip2Model(config).save_pretrained(folder)
        images = Siglip2ImageProcessor(patch_size=16, max_num_patches=256, **processor)
        Siglip2Processor(image_processor=images, tokenizer=tokenizer).save_pretrained(folder)
    else:
        config = SiglipConfig(vision_config={**TINY_VIT, "image_size": 32, "patch_size": 8}, text_config=text)
        SiglipModel(config).save_pretrained(folder)
        images = SiglipImageProcessor(**{"size": {"height": 32, "width": 32}, **processor})
        SiglipProcessor(image_processor=images, tokenizer=tokenizer).save_pretrained(folder)


def _features(out: Any) -> torch.Tensor:
    """get_*_features returns a tensor (or, in some transformers versions, an output with pooler_output)."""
    return out if isinstance(out, torch.Tensor) else out.pooler_output


def native_hf_images(folder: Path, images: Sequence[Any]) -> torch.Tensor:
    """AutoProcessor (the PIL image backend, as the checkpoints were published) + AutoModel.get_image_features,
    normalised.

    A processor without `do_convert_rgb` (SigLIP2 NaFlex) fails on non-RGB images: those get
    transformers' own `convert_to_rgb` first, as every other processor applies it.
    """
    from transformers import AutoModel, AutoProcessor
    from transformers.image_transforms import convert_to_rgb

    processor = AutoProcessor.from_pretrained(str(folder), backend="pil")
    model = AutoModel.from_pretrained(str(folder)).eval()
    if not processor.image_processor.do_convert_rgb:
        images = [convert_to_rgb(im, return_numpy=True) if isinstance(im, Image.Image) else im for im in images]
    with torch.no_grad():
        return F.normalize(_features(model.get_image_features(**processor(images=list(images), return_tensors="pt"))), dim=-1)


def native_hf_texts(folder: Path, texts: Sequence[str], trained_without_mask: bool) -> torch.Tensor:
    """AutoProcessor text -> get_text_features, normalised, with each family's training convention:
    CLIP pads to the longest text with a mask; SigLIP / SigLIP2 pad to the maximum length and take no mask."""
    from transformers import AutoModel, AutoProcessor

    processor, model = AutoProcessor.from_pretrained(str(folder)), AutoModel.from_pretrained(str(folder)).eval()
    if trained_without_mask:
        context = model.config.text_config.max_position_embeddings
        tokens = processor(text=list(texts), padding="max_length", truncation=True, max_length=context, return_tensors="pt")
        inputs = {"input_ids": tokens["input_ids"]}
    else:
        inputs = dict(processor(text=list(texts), padding=True, truncation=True, return_tensors="pt"))
    with torch.no_grad():
        return F.normalize(_features(model.get_text_features(**inputs)), dim=-1)


# -- open_clip local-dir folders ------------------------------------------------------------------
OPENCLIP_VIT = {"embed_dim": 24, "vision_cfg": {"image_size": 32, "patch_size": 8, "width": 32, "layers": 1,
                                                 "head_width": 16},
                "text_cfg": {"context_length": CONTEXT, "width": 32, "heads": 2, "layers": 1}}
EVA_TINY = {"embed_dim": 24, "custom_text": True,
            "vision_cfg": {"image_size": 224, "timm_model_name": "eva02_tiny_patch14_224",
                           "timm_model_pretrained": False, "timm_pool": "token", "timm_proj": None},
            "text_cfg": {"context_length": CONTEXT, "width": 32, "heads": 2, "layers": 1}}


def write_open_clip(folder: Path, model_cfg: dict[str, Any], preprocess_cfg: dict[str, Any],
                    hf_tokenizer: bool = False) -> None:
    """open_clip's local-dir layout: open_clip_config.json {model_cfg, preprocess_cfg} + open_clip_model.safetensors.

    With `hf_tokenizer`, a transformers tokenizer in the folder, named by text_cfg.hf_tokenizer_name (as open_clip's
    save_for_hf writes one); otherwise open_clip's bundled BPE.
    """
    import open_clip
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    cfg = json.loads(json.dumps(model_cfg))
    if hf_tokenizer:
        tokenizer = clip_tokenizer()
        tokenizer.save_pretrained(folder)
        cfg["text_cfg"].update(vocab_size=len(tokenizer), hf_tokenizer_name="local", eos_id=tokenizer.eos_token_id,
                               pad_id=tokenizer.pad_token_id, pool_type="eos")
    custom = cfg.pop("custom_text", False)
    seed()
    model = (open_clip.CustomTextCLIP if custom else open_clip.CLIP)(**cfg)
    if custom:
        cfg["custom_text"] = True
    (folder / "open_clip_config.json").write_text(json.dumps({"model_cfg": cfg, "preprocess_cfg": preprocess_cfg}))
    save_file(model.state_dict(), str(folder / "open_clip_model.safetensors"))


def native_open_clip(folder: Path, images: Sequence[Any], texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """create_model_and_transforms("local-dir:...") + get_tokenizer: normalised image and text embeddings."""
    import open_clip

    model, _, preprocess = open_clip.create_model_and_transforms(f"local-dir:{folder}")
    tokenizer = open_clip.get_tokenizer(f"local-dir:{folder}")
    model.eval()
    with torch.no_grad():
        pixels = torch.stack([preprocess(image) for image in images])
        return model.encode_image(pixels, normalize=True), model.encode_text(tokenizer(list(texts)), normalize=True)


# -- CLAP processor folders -----------------------------------------------------------------------
CLAP_RATE = 8000
_CLAP_TEXT = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64,
              "max_position_embeddings": CONTEXT + 2}
_CLAP_AUDIO = {"spec_size": 32, "num_mel_bins": 16, "patch_size": 4, "patch_stride": [4, 4], "window_size": 4,
               "depths": [1, 1], "num_attention_heads": [2, 4], "patch_embeds_hidden_size": 16, "hidden_size": 32}
CLAP_AUDIO = {  # family -> audio config written over _CLAP_AUDIO
    "clap-htsat-unfused": {},
    "clap-htsat-fused": {"spec_size": 64, "num_mel_bins": 64, "enable_fusion": True, "fusion_type": "aff_2d"},
    "clap-general": {"depths": [1, 2], "patch_embeds_hidden_size": 24, "hidden_size": 48},
    "clap-music": {"depths": [2, 1], "num_attention_heads": [2, 2]},
}


def write_clap(folder: Path, family: str) -> None:
    """ClapModel + ClapProcessor (feature extractor, RoBERTa tokenizer) via save_pretrained; 1 s windows at 8 kHz."""
    from transformers import ClapConfig, ClapFeatureExtractor, ClapModel, ClapProcessor

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = roberta_tokenizer()
    audio = {**_CLAP_AUDIO, **CLAP_AUDIO[family]}
    config = ClapConfig(text_config={**_CLAP_TEXT, **_text_ids(tokenizer)}, audio_config=audio, projection_dim=24)
    seed()
    ClapModel(config).save_pretrained(folder)
    fused = bool(audio.get("enable_fusion"))
    extractor = ClapFeatureExtractor(feature_size=audio["num_mel_bins"], sampling_rate=CLAP_RATE, hop_length=128,
                                     fft_window_size=256, max_length_s=1, frequency_min=40, frequency_max=4000,
                                     truncation="fusion" if fused else "rand_trunc")
    ClapProcessor(feature_extractor=extractor, tokenizer=tokenizer).save_pretrained(folder)


def clips() -> list[np.ndarray]:
    """Mono clips at CLAP_RATE shorter than, equal to and longer than the 1 s window."""
    rng = np.random.default_rng(2)
    return [rng.uniform(-0.5, 0.5, n).astype(np.float32) for n in (3000, CLAP_RATE, 13000)]


def native_clap(folder: Path, waves: Sequence[np.ndarray], texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """ClapProcessor + ClapModel.get_audio_features / get_text_features, normalised (numpy seeded for crops)."""
    from transformers import ClapModel, ClapProcessor

    processor, model = ClapProcessor.from_pretrained(str(folder)), ClapModel.from_pretrained(str(folder)).eval()
    np.random.seed(0)
    audio = processor(audio=list(waves), sampling_rate=CLAP_RATE, return_tensors="pt")
    text = processor(text=list(texts), padding=True, truncation=True, return_tensors="pt")
    with torch.no_grad():
        return (F.normalize(_features(model.get_audio_features(**audio)), dim=-1),
                F.normalize(_features(model.get_text_features(**text)), dim=-1))
