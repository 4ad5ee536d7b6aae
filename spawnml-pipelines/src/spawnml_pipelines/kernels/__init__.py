"""The pipelines' pixel kernels, written once in spawnml's kernel language.

Every kernel has a numpy twin in :mod:`spawnml_pipelines.kernels.reference` that the tests
compare against on each backend.
"""
