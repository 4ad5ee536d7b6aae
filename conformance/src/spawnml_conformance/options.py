"""The options of ``spawnml-conformance``, defined once for the standalone runner and for
``spawnml conformance`` (this module imports nothing heavy: the ``spawnml`` CLI loads it
on every start)."""

from __future__ import annotations

import argparse

DESCRIPTION = "The op × backend conformance matrix: every suite on every selected backend."
EPILOG = (
    "Exit status: 0 when no cell fails (with --baseline: when no cell fails that did not fail "
    "in the baseline), 1 otherwise, 2 on a usage or setup error such as an unknown backend."
)


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Every option of the runner, on ``p`` (the standalone parser or the CLI's subparser)."""
    p.add_argument("--backend", action="append", metavar="B",
                   help="backend(s) to check, repeatable or comma-separated (default: all)")
    p.add_argument("--ops", action="append", metavar="A,B", help="only these op types")
    p.add_argument("--onnx-node-tests", action="store_true",
                   help="also run the official ONNX node tests of the selected ops")
    p.add_argument("--compile-only", nargs="?", const="*", default="", metavar="B,...",
                   help="only compile (with the backend's compile_check): all selected "
                        "backends, or the ones named")
    p.add_argument("--max-cases", type=int, default=None, metavar="N",
                   help="sample at most N generated cases per op (every kind of case kept)")
    p.add_argument("--no-kernels", action="store_true", help="skip the kernel suite row")
    p.add_argument("--no-reference-check", action="store_true",
                   help="skip cross-checking the references against onnx.reference")
    p.add_argument("--json", metavar="FILE", help="write the matrix as JSON")
    p.add_argument("--markdown", metavar="FILE", help="write the matrix as markdown")
    p.add_argument("--baseline", metavar="FILE",
                   help="a previous --json matrix: exit 1 only for cells that fail now but did "
                        "not fail there (every failure is still reported)")
    p.add_argument("--log", metavar="FILE",
                   help="write what cases emit besides their outcome (log records such as "
                        "placement notes, warnings, and the process's stderr, e.g. driver "
                        "compilers), each with its case, to FILE; without --log the log "
                        "records and warnings are only counted, never printed")
    p.add_argument("--summary", action="store_true",
                   help="print only the summary (failures or, with --baseline, regressions "
                        "and newly passing cells, then the result), not the whole matrix")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    return p


def build_parser(prog: str = "spawnml-conformance") -> argparse.ArgumentParser:
    return add_arguments(argparse.ArgumentParser(prog=prog, description=DESCRIPTION,
                                                 epilog=EPILOG))


def command_line(args: argparse.Namespace, prog: str = "spawnml-conformance") -> str:
    """The command that gives ``args``, options in definition order, defaults left out (the
    same whichever entry point parsed them)."""
    words = [prog]
    for action in build_parser()._actions:
        if not action.option_strings or action.dest == "help":
            continue
        flag, value = action.option_strings[0], getattr(args, action.dest, action.default)
        if value == action.default or value is None:
            continue
        if action.nargs == 0:  # a flag such as --quiet
            words.append(flag)
        elif isinstance(value, list):  # a repeatable option such as --backend
            words += [flag, ",".join(value)]
        elif value == action.const:
            words.append(flag)
        else:
            words += [flag, str(value)]
    return " ".join(words)
