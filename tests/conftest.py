"""Shared pytest set-up: never touch the model hub, stay on one thread, and a tiny caption tokenizer."""

import os
import tempfile

os.environ["HF_HUB_OFFLINE"] = "1"  # must precede any transformers / huggingface_hub import
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# the CLI caches features under the user's cache home by default: keep test runs out of it
os.environ.setdefault("PLATONIC_CACHE_DIR", tempfile.mkdtemp(prefix="platonic-test-cache-"))

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

CAPTIONS = tuple(
    f"a {size} {colour} {shape} on a {background} background"
    for size in ("small", "large")
    for colour in ("red", "green", "blue", "yellow")
    for shape in ("circle", "square", "triangle")
    for background in ("dark", "light")
)


@pytest.fixture(scope="session")
def caption_tokenizer():
    """A word-level tokenizer trained in-process on synthetic captions (context length 16)."""
    from platonic_sdk.adapters._text import train_tokenizer

    return train_tokenizer(CAPTIONS, vocab_size=64, max_length=16)
