"""The ``spawnml`` command line. Plugins add subcommands through ``spawnml_register_commands``."""

from __future__ import annotations

import argparse
import json
import sys
import traceback
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
    from .registry import collect_all

    collect_all()  # run every registration hook, so their errors are listed too
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
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback when a command fails (anywhere on the line)")
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


def _fail(message: str) -> int:
    print(f"spawnml: error: {message}", file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. Every failure ends in one ``spawnml: error: ...`` line and exit
    status 1 (argparse's usage errors: 2; Ctrl-C: 130); ``--debug`` adds the traceback."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv[: argv.index("--")] if "--" in argv else "--debug" in argv
    parser = build_parser()
    args = parser.parse_args([a for a in argv if a != "--debug"] if debug else argv)
    args.debug = debug
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return _fail("interrupted") + 129
    except SpawnMLError as exc:
        if args.debug:
            traceback.print_exc()
        return _fail(str(exc))
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback, unless --debug
        if args.debug:
            traceback.print_exc()
        return _fail(f"{type(exc).__name__}: {exc}" + ("" if args.debug else
                                                       " (run with --debug for the traceback)"))


if __name__ == "__main__":
    sys.exit(main())
