"""spawnml's operator/backend conformance suite.

``spawnml-conformance`` (``spawnml_conformance.runner``) prints the op × backend matrix;
``spawnml_conformance.kit.BackendConformance`` is the base test class plugin authors inherit.
"""
