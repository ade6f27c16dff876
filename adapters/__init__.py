"""Family adapters: one small module per model family, each registering its families with the registry
on import. `FAMILY_MODULES` names the module of every built-in family, so that family names are known
(listed, checked, suggested) before any model library is imported."""

FAMILY_MODULES = {
    "clip": "platonic_sdk.adapters.clip",
    "metaclip": "platonic_sdk.adapters.clip",
    "openclip": "platonic_sdk.adapters.openclip",
    "evaclip": "platonic_sdk.adapters.evaclip",
    "siglip": "platonic_sdk.adapters.siglip",
    "siglip2": "platonic_sdk.adapters.siglip",
    "clap-htsat-unfused": "platonic_sdk.adapters.clap",
    "clap-htsat-fused": "platonic_sdk.adapters.clap",
    "clap-general": "platonic_sdk.adapters.clap",
    "clap-music": "platonic_sdk.adapters.clap",
    "lit": "platonic_sdk.adapters.lit",
}
