"""spawnml's operator/backend conformance suite."""
