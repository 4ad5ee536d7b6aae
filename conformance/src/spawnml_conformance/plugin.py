"""spawnml entry point of the conformance suite: adds ``spawnml conformance``."""

from __future__ import annotations

import argparse
from typing import Any

from spawnml import hookimpl


@hookimpl
def spawnml_register_commands(cli: Any) -> None:
    """``spawnml conformance ...``: the same as the ``spawnml-conformance`` runner."""
    p = cli.add_parser("conformance", help="op × backend conformance matrix (spawnml-conformance)",
                       add_help=False)
    p.add_argument("args", nargs=argparse.REMAINDER)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from .runner import main

    return main(args.args)
