"""The audio world's zoo recipe: four tiny CLAP members (HTSAT audio towers of different widths and depths,
one fused), their pretraining and the source fine-tunes (`python -m platonic_sdk.worlds.train_zoo --modality
audio`). Apart from the world (worlds/audio.py), which reads no model library."""

from __future__ import annotations

from typing import Any

from .audio import AUDIO_ZOO_DIR, AudioWorld
from .pretrain import PretrainConfig
from .zoo import ZooMember, ZooRecipe

# 1 s at 8 kHz, 63 frames: 16 mel bins fold into a 32^2 HTSAT input; the fused member needs 64 mel bins.
_FEATURES = {"sampling_rate": 8000, "hop_length": 128, "fft_window_size": 256, "max_length_s": 1,
             "frequency_min": 40, "frequency_max": 4000}


def _clap(proj: int, patch_width: int, depths: list[int], heads: list[int], text_width: int, text_layers: int,
          features: dict[str, Any] | None = None, **audio: Any) -> dict[str, Any]:
    """A ClapModel config over the family's tiny one: HTSAT stages of widths patch_width * 2^k."""
    return {
        "projection_dim": proj,
        "audio_config": {"spec_size": 32, "num_mel_bins": 16, "patch_embeds_hidden_size": patch_width, "depths": depths,
                         "num_attention_heads": heads, "hidden_size": patch_width * 2 ** (len(depths) - 1),
                         "window_size": 4, **audio},
        "text_config": {"hidden_size": text_width, "intermediate_size": 2 * text_width,
                        "num_hidden_layers": text_layers, "num_attention_heads": 2},
        "features": {**_FEATURES, **(features or {})},
    }


AUDIO_ZOO: tuple[ZooMember, ...] = (
    ZooMember("clap-htsat-unfused", "clap-htsat-unfused", _clap(48, 32, [2, 2], [2, 4], 48, 2), "contrastive", seed=11),
    ZooMember(
        "clap-htsat-fused", "clap-htsat-fused",
        _clap(64, 32, [2, 2], [2, 4], 64, 2, features={"fft_window_size": 512}, spec_size=64, num_mel_bins=64,
              patch_size=8, patch_stride=[8, 8]),
        "contrastive", seed=12,
    ),
    ZooMember("clap-general", "clap-general", _clap(80, 48, [3, 3], [4, 4], 64, 2), "contrastive", seed=13),
    ZooMember("clap-music", "clap-music", _clap(32, 40, [1, 1], [2, 4], 32, 1), "contrastive", seed=14),
)
AUDIO_CORPUS_SIZE = 20_000
AUDIO_PRETRAIN = PretrainConfig(steps=1000, batch_size=64, lr=2e-3)
# Source fine-tuning of the shipped zoo: rank-4 LoRA on HTSAT's q/v (docs/method.md sec. 6), lr and epochs
# raised for models trained from scratch, as the image zoo's (10 epochs at 5e-3). The authors' 3 epochs
# at lr 2e-3 moved the transposed-register task by 6-12 points (two members, world seed 0); 10 epochs at
# 5e-3 fit its train split (100%) and reach 97-99% on test.
AUDIO_FINETUNE = dict(rank=4, lora_alpha=8.0, epochs=10, lr=5e-3, batch_size=32, weight_decay=0.01)
AUDIO_ZOO_RECIPE = ZooRecipe("audio", lambda: AudioWorld(seed=0), AUDIO_ZOO, AUDIO_ZOO_DIR, AUDIO_CORPUS_SIZE, AUDIO_PRETRAIN,
                             AUDIO_FINETUNE, half=True)
