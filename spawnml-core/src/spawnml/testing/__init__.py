"""Test helpers shipped with spawnml-core: the kernel suite every backend runs."""
