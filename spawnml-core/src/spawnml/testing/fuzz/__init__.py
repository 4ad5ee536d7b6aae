"""Fuzzers for spawnml (issue #20): mutated and generated ONNX models run on a spawnml backend,
judged against onnxruntime and ``onnx.reference``, in worker processes that may crash or hang.

``seeds`` builds small valid models, ``mutate`` damages them (bytes and structure), ``graphs``
generates random valid graphs with feeds, ``cases`` turns a (kind, seed) pair into a
reproducible case, ``oracle`` runs and classifies one case, ``workers`` runs cases in
replaceable processes with a timeout, ``report`` groups the outcomes into bugs and
``faults`` holds deliberately broken runners that check the machinery itself.
``scripts/fuzz.py`` is the command line.
"""
