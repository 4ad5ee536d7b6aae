"""Entry point of the conformance suite.

It implements no hook yet; it is registered now so that ``spawnml plugins`` lists the
installed suite and its version, and it will add the ``spawnml conformance`` command.
"""
