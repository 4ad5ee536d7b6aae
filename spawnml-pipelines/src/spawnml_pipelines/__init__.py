"""spawnml's image pipelines (classification, depth, style, background removal, upscaling)."""
