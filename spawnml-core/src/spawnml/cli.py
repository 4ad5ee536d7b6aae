"""The ``spawnml`` command line. Plugins add subcommands through ``spawnml_register_commands``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from . import __version__
from .errors import SpawnMLError
from .plugins import get_plugin_manager
from .registry import list_backends


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    )


def _warn_failed_plugins() -> None:
    for record in get_plugin_manager().failed():
        print(
            f"spawnml: plugin {record.name!r} failed: {record.error} (see `spawnml plugins`)",
            file=sys.stderr,
        )


def cmd_backends(args: argparse.Namespace) -> int:
    infos = list_backends()
    if args.json:
        print(json.dumps([info.as_dict() for info in infos], indent=2))
    else:
        rows = [
            [
                i.name,
                "yes" if i.available else "no",
                i.device_kind.value,
                i.device or "-",
                i.reason or "-",
            ]
            for i in infos
        ]
        print(_table(rows, ["backend", "available", "kind", "device", "reason"]))
    _warn_failed_plugins()
    return 0


def cmd_plugins(args: argparse.Namespace) -> int:
    pm = get_plugin_manager()
    records = pm.records
    if args.json:
        print(json.dumps([r.as_dict() for r in records], indent=2))
        return 0
    rows = [
        [
            r.name,
            f"{r.distribution} {r.version}".strip() or "-",
            ", ".join(h.removeprefix("spawnml_register_") for h in r.hooks) or "-",
            r.error or "ok",
        ]
        for r in records
    ]
    print(_table(rows, ["plugin", "distribution", "hooks", "status"]))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spawnml", description="Run neural networks on any hardware from one operator source."
    )
    parser.add_argument("--version", action="version", version=f"spawnml {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("backends", help="list registered backends and whether they can run here")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_backends)
    p = sub.add_parser("plugins", help="list loaded plugins, their hooks and load errors")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_plugins)
    from .cli_model import add_commands  # model commands import numpy/onnx lazily
    from .cli_ops import add_commands as add_ops_command

    add_commands(sub, _table)
    add_ops_command(sub, _table)
    pm = get_plugin_manager()
    for impl in pm.pm.hook.spawnml_register_commands.get_hookimpls():
        try:
            impl.function(cli=sub)
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the CLI
            pm.record_error(impl.plugin_name, f"spawnml_register_commands failed: {exc!r}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except SpawnMLError as exc:
        print(f"spawnml: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
