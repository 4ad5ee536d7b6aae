"""spawnml entry point of the conformance suite: adds ``spawnml conformance``."""

from __future__ import annotations

import argparse
from typing import Any

from spawnml import hookimpl

from .options import DESCRIPTION, EPILOG, add_arguments


@hookimpl
def spawnml_register_commands(cli: Any) -> None:
    """``spawnml conformance ...``: the ``spawnml-conformance`` runner, with the same options
    (one definition, :func:`spawnml_conformance.options.add_arguments`)."""
    p = cli.add_parser("conformance", help="op × backend conformance matrix (spawnml-conformance)",
                       description=DESCRIPTION, epilog=EPILOG)
    add_arguments(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from .runner import run  # the suites import the registry: only when the command runs

    return run(args, prog="spawnml conformance")
