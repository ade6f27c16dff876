"""Family adapters: one small module per model family, each registering its families with the registry
on import. `CATALOG` holds the static facts of every built-in family (its module, modality, reference
checkpoint and description), so that family names are known (listed, checked, suggested) and
`platonic families` prints its table before any model library is imported; tests/test_adapters.py holds
the catalog to what the adapters register."""

from typing import NamedTuple


class Family(NamedTuple):
    """A built-in family's static facts: the module that registers it, and what its FamilySpec says."""

    module: str
    modality: str
    default_checkpoint: str | None
    description: str


CATALOG = {
    "clip": Family("platonic_sdk.adapters.clip", "image", "openai/clip-vit-large-patch14", "OpenAI CLIP (transformers CLIPModel)"),
    "metaclip": Family("platonic_sdk.adapters.clip", "image", "facebook/metaclip-l14-400m", "MetaCLIP (transformers CLIPModel)"),
    "openclip": Family("platonic_sdk.adapters.openclip", "image", "laion/CLIP-ViT-L-14-laion2B-s32B-b82K", "an open_clip ViT"),
    "evaclip": Family("platonic_sdk.adapters.evaclip", "image", "EVA02-L-14:merged2b_s4b_b131k", "an open_clip EVA model (timm EVA trunk)"),
    "siglip": Family("platonic_sdk.adapters.siglip", "image", "google/siglip-large-patch16-256", "SigLIP (transformers SiglipModel)"),
    "siglip2": Family("platonic_sdk.adapters.siglip", "image", "google/siglip2-large-patch16-256",
                      "SigLIP2 (transformers SiglipModel fixed-res, or Siglip2Model NaFlex)"),
    "clap-htsat-unfused": Family("platonic_sdk.adapters.clap", "audio", "laion/clap-htsat-unfused",
                                "LAION-CLAP HTSAT-tiny + RoBERTa, unfused (630k-audioset-best)"),
    "clap-htsat-fused": Family("platonic_sdk.adapters.clap", "audio", "laion/clap-htsat-fused",
                              "LAION-CLAP HTSAT-tiny + RoBERTa with feature fusion for long clips"),
    "clap-general": Family("platonic_sdk.adapters.clap", "audio", "laion/larger_clap_general",
                           "LAION-CLAP HTSAT-base + RoBERTa trained on general audio, music and speech"),
    "clap-music": Family("platonic_sdk.adapters.clap", "audio", "laion/larger_clap_music", "LAION-CLAP HTSAT-base + RoBERTa trained on music"),
    "lit": Family("platonic_sdk.adapters.lit", "image", None, "LiT-style: frozen EfficientNet-Lite trunk + MLP head, frozen MiniLM + projection"),
    "lit-audio": Family("platonic_sdk.adapters.lit_audio", "audio", None,
                        "LiT-style audio: frozen resemblyzer / CREPE trunks + MLP head, frozen MiniLM + projection"),
}
FAMILY_MODULES = {name: entry.module for name, entry in CATALOG.items()}
