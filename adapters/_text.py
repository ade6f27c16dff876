"""Text tokenizers for the adapters: train a tiny one in-process, and guard every loaded one.

Offline, several transformers tokenizer classes silently return a 2-5 token vocabulary for a hub id
they cannot fetch (with HF_HUB_OFFLINE=1 or no network); `check_vocab` turns that into a loud CheckpointError.
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable, Sequence

from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from platonic_sdk.errors import CheckpointError, PlatonicError

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<eos>"
# Order fixes the ids pad=0, unk=1, bos=2, eos=3. HF CLIP treats eos_token_id == 2 as a legacy
# config and pools at argmax(input_ids) instead of at the eos token, so eos must not be 2.
SPECIAL_TOKENS = (PAD, UNK, BOS, EOS)
_GENERIC_CLASSES = ("TokenizersBackend", "PreTrainedTokenizerFast")

# A few words so that `from_config(None)` has a tokenizer without any corpus at hand.
_DEFAULT_CORPUS = tuple(
    f"a photo of a {colour} {thing}"
    for colour in ("red", "green", "blue", "yellow", "black", "white", "small", "large")
    for thing in ("circle", "square", "triangle", "digit", "letter", "dog", "cat", "car", "sound", "image")
)


def train_tokenizer(
    corpus: Iterable[str],
    vocab_size: int = 1000,
    *,
    kind: str = "wordlevel",
    max_length: int = 16,
    min_frequency: int = 1,
) -> PreTrainedTokenizerFast:
    """Train a lowercase WordLevel or BPE tokenizer on `corpus`; every encoding is <bos> ... <eos>.

    Special ids are pad=0, unk=1, bos=2, eos=3; `max_length` becomes the tokenizer's
    `model_max_length` (the context length the text towers are built with).
    """
    if kind == "wordlevel":
        tok = Tokenizer(models.WordLevel(unk_token=UNK))
        trainer = trainers.WordLevelTrainer(
            vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=list(SPECIAL_TOKENS)
        )
    elif kind == "bpe":
        tok = Tokenizer(models.BPE(unk_token=UNK))
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=list(SPECIAL_TOKENS)
        )
    else:
        raise PlatonicError(f"unknown tokenizer kind {kind!r} (use 'wordlevel' or 'bpe')")
    if max_length < 3:
        raise PlatonicError(f"max_length must leave room for <bos> and <eos>, got {max_length}")
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(corpus, trainer=trainer)
    if tok.get_vocab_size() <= len(SPECIAL_TOKENS):
        raise PlatonicError("the corpus gave no tokens beyond the special ones (is it empty?)")
    bos, eos = tok.token_to_id(BOS), tok.token_to_id(EOS)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A {EOS}", special_tokens=[(BOS, bos), (EOS, eos)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD,
        unk_token=UNK,
        bos_token=BOS,
        eos_token=EOS,
        model_max_length=max_length,
    )


def default_tokenizer(max_length: int = 16) -> PreTrainedTokenizerFast:
    """A ~30-word tokenizer for the families' tiny test configs."""
    return train_tokenizer(_DEFAULT_CORPUS, vocab_size=100, max_length=max_length)


def context_length_of(tokenizer: PreTrainedTokenizerBase, default: int = 16) -> int:
    """The tokenizer's `model_max_length`, or `default` when that is a "no limit" placeholder (> 512)."""
    return int(tokenizer.model_max_length) if tokenizer.model_max_length <= 512 else default


def check_texts(texts: Sequence[str]) -> list[str]:
    """The texts as a list, or PlatonicError for a bare string or an empty sequence."""
    if isinstance(texts, str) or not len(texts) or not all(isinstance(t, str) for t in texts):
        raise PlatonicError("embed_text needs a non-empty sequence of strings")
    return list(texts)


def check_vocab(tokenizer: Any, vocab_size: int, where: str) -> None:
    """Fail loudly unless the tokenizer's ids fill most of, and fit into, a text tower of `vocab_size` rows.

    Takes transformers tokenizers and open_clip's (which expose `vocab_size` but no length).
    """
    n = len(tokenizer) if hasattr(tokenizer, "__len__") else int(tokenizer.vocab_size)
    if n > vocab_size or 2 * n < vocab_size:
        raise CheckpointError(
            f"tokenizer from {where} has {n} tokens but the text tower has {vocab_size} embeddings "
            "(an offline tokenizer load that silently returned an almost empty vocabulary?)"
        )


def _is_generic(folder: str | os.PathLike) -> bool:
    """Whether a folder holds a plain `tokenizers` tokenizer (as `train_tokenizer` makes)."""
    path = os.path.join(folder, "tokenizer_config.json")
    if not os.path.isfile(path):
        return False
    with open(path) as f:
        return json.load(f).get("tokenizer_class") in _GENERIC_CLASSES


def load_tokenizer(source: str | os.PathLike, vocab_size: int) -> PreTrainedTokenizerBase:
    """The tokenizer of a folder or hub id, then `check_vocab`.

    Hub ids and model-specific folders go through AutoTokenizer (which raises offline). A plain
    `tokenizers` tokenizer is loaded as such: AutoTokenizer would map it by the folder's model_type
    (e.g. to Siglip2Tokenizer, which adds a <mask> token the text tower does not have).
    """
    try:
        generic = os.path.isdir(source) and _is_generic(source)
        tokenizer = (PreTrainedTokenizerFast if generic else AutoTokenizer).from_pretrained(str(source))
    except Exception as exc:  # transformers raises OSError, ValueError, ... for missing/corrupt files
        raise CheckpointError(f"cannot load a tokenizer from {source}: {exc}") from exc
    check_vocab(tokenizer, vocab_size, str(source))
    return tokenizer
