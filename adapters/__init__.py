"""Family adapters: one small module per model family, each registering itself with the registry."""
