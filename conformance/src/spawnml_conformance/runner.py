"""``spawnml-conformance`` (also ``spawnml conformance``): every suite on every selected
backend, as one op × backend matrix. The options are defined once, in :mod:`.options`.

Each case is judged by :func:`checks.verdict`, the rule the pytest kit applies too: a case
that fails on the reference executor (cpu) as well is an op issue, ``xfail`` on every other
backend (the case is run on cpu for that purpose when cpu is not among the backends
checked). Exit status 0 when no cell fails (xfail cells and reference disagreements are
reported, not deciding), 1 when any cell fails (with ``--baseline``: any cell that did not
fail there), 2 on a usage or setup error (an unknown backend, an unreadable baseline).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from spawnml.backend import Backend
from spawnml.errors import BackendUnavailableError, PluginError, SpawnMLError
from spawnml.registry import get_backend, list_backends, op_definitions
from spawnml.testing.kernel_suite import CASES as KERNEL_CASES

from . import cases as case_gen, checks, compile_only, onnx_tests
from .checks import SKIP, Outcome
from .diagnostics import Diagnostics
from .options import add_arguments, build_parser, command_line
from .progress import Progress
from .reference_check import check_reference
from .report import KERNELS, ONNX, OPS, REFERENCE, Column, Report

ROW_KERNELS = "kernels"
__all__ = ["Config", "Runner", "add_arguments", "build_parser", "main", "run"]


@dataclass
class Config:
    backends: list[str] | None = None  # None: every registered backend
    ops: list[str] | None = None  # None: every registered op
    onnx_node_tests: bool = False
    compile_only: set[str] = field(default_factory=set)  # "*" for all selected backends
    max_cases: int | None = None  # per op, sampled (see cases.sample)
    kernels: bool = True
    reference_check: bool = True
    progress: bool = True
    op_defs: list[Any] | None = None  # explicit OpDefs (tests); default: the registry


def _default(domain: str) -> str:
    return "" if domain == "ai.onnx" else domain


def _op_name(name: str) -> tuple[str | None, str]:
    """``OpType`` (every domain) or ``domain::OpType`` (``ai.onnx::`` or ``::``: default)."""
    domain, sep, op_type = name.rpartition("::")
    return (_default(domain) if sep else None), op_type


def selected_ops(config: Config) -> list[tuple[str, Any]]:
    """(row name, OpDef) for every op (every opset range) selected."""
    if config.op_defs is not None:
        defs = {(op.domain, op.op_type): [op] for op in config.op_defs}
    else:
        try:
            defs = op_definitions()
        except Exception as exc:
            message = f"the op registry failed to load: {type(exc).__name__}: {exc}"
            raise PluginError(message) from exc
    wanted = [_op_name(n) for n in config.ops] if config.ops else None
    rows = []
    for (domain, op_type), versions in sorted(defs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if wanted is not None and not any(
            t == op_type and d in (None, _default(domain)) for d, t in wanted
        ):
            continue
        for op in versions:
            name = op_type if not domain else f"{domain}::{op_type}"
            if len(versions) > 1:
                name += f" (opset {op.since_version}+)"
            rows.append((name, op))
    return rows


class Runner:
    """Runs the selected suites and fills a :class:`Report`."""

    def __init__(self, config: Config, diagnostics: Diagnostics | None = None) -> None:
        self.config = config
        self.report = Report()
        self.progress = Progress(diagnostics.terminal if diagnostics else None,
                                 enabled=config.progress)
        self.diagnostics = diagnostics  # log records are attributed to the case they follow
        self._cases: dict[str, list[case_gen.ConformanceCase]] = {}
        self._on_cpu: dict[int, list[Outcome] | None] = {}  # id(case): its outcomes on cpu
        self.verdicts: dict[tuple[str, str, str], checks.Verdict] = {}
        """(row, backend, case name): the verdict on each op case (what the kit would say)."""

    def add(self, section: str, row: str, column: str, outcome: Outcome) -> None:
        self.report.add(section, row, column, outcome)
        if self.diagnostics is not None:
            self.diagnostics.attribute(f"{column} / {section} / {row} / {outcome.case}")

    def cases(self, row: str, op: Any) -> list[case_gen.ConformanceCase]:
        if row not in self._cases:
            self._cases[row] = case_gen.sample(case_gen.generate(op), self.config.max_cases)
        return self._cases[row]

    def run(self) -> Report:
        start = time.monotonic()
        cfg = self.config
        ops = selected_ops(cfg)
        infos = {i.name: i for i in list_backends()}
        names = cfg.backends or list(infos)
        unknown = unknown_backends(names, list(infos))
        if unknown:
            raise BackendUnavailableError(unknown)
        for section in (KERNELS, OPS, ONNX):  # display order
            self.report.sections[section] = {}
        self.report.meta.update({
            "python": platform.python_version(),
            "ops": len(ops),
            "max_cases_per_op": cfg.max_cases,
        })
        targets: list[tuple[str, Any, bool]] = []  # (name, backend or target, compile-only)
        for name in names:
            compile_mode = "*" in cfg.compile_only or name in cfg.compile_only
            info = infos[name]
            if compile_mode:
                found = compile_only.find_compile_check(name)
                if found is None:
                    reason = "--compile-only: the backend's package exports no compile_check"
                    self.report.columns.append(Column(name, "unavailable", reason=reason))
                    continue
                self.report.columns.append(Column(name, "compile-only",
                                                  device="compile_check, no device"))
                targets.append((name, compile_only.CompileCheckBackend(name, *found), True))
            elif not info.available:
                self.report.columns.append(Column(name, "unavailable", reason=info.reason))
            else:
                try:
                    backend = get_backend(name)
                except SpawnMLError as exc:
                    self.report.columns.append(Column(name, "unavailable", reason=str(exc)))
                    continue
                self.report.columns.append(Column(name, "run", device=info.device))
                targets.append((name, backend, False))
        if cfg.kernels:
            for name, target, compile_mode in targets:
                self._kernels(name, target, compile_mode)
        # row by row, every backend, then the row's cases are dropped: memory stays that of
        # one op's cases however many ops and backends are checked
        for k, (row, op) in enumerate(ops):
            if cfg.reference_check:
                self.progress.step(f"onnx.reference cross-check: {row}", k + 1, len(ops))
                for case in self.cases(row, op):
                    self.add(OPS, row, REFERENCE, check_reference(case))
            for name, target, compile_mode in targets:
                suffix = " (compile only)" if compile_mode else ""
                self.progress.step(f"{name}: {row}{suffix}", k + 1, len(ops), force=True)
                if compile_mode:
                    for case in self.cases(row, op):
                        self.add(OPS, row, name, compile_only.check_op_case(target, case))
                else:
                    self._run_row(target, row, op)
            self._cases.pop(row, None)
            self._on_cpu.clear()
        for name, target, compile_mode in targets:
            if compile_mode:
                if cfg.onnx_node_tests:
                    for row, _ in ops:
                        self.add(ONNX, row, name,
                                 Outcome(SKIP, "*", None, "compile-only: nothing is run"))
                self.report.meta[f"{name}_kernels_compiled"] = len(target.checked)
            elif cfg.onnx_node_tests:
                self._onnx(target, ops)
        self.progress.done()
        self.report.meta["seconds"] = round(time.monotonic() - start, 1)
        return self.report

    # -- suites ---------------------------------------------------------------------------
    def _kernels(self, name: str, target: Any, compile_mode: bool) -> None:
        what = "kernel suite (compile only)" if compile_mode else "kernel suite"
        for k, kc in enumerate(KERNEL_CASES):
            self.progress.step(f"{name}: {what}", k + 1, len(KERNEL_CASES))
            outcome = (compile_only.check_kernel_case(target, kc) if compile_mode
                       else checks.run_kernel_case(target, kc))
            self.add(KERNELS, ROW_KERNELS, name, outcome)

    def _run_row(self, backend: Backend, row: str, op: Any) -> None:
        name = backend.name
        for case in self.cases(row, op):
            outcomes = self._outcomes(backend, case)
            found = checks.verdict(name, case, outcomes, lambda c=case: self._cpu(c))
            self.verdicts[(row, name, case.name)] = found
            for outcome in checks.apply_verdict(found, outcomes):
                self.add(OPS, row, name, outcome)

    def _outcomes(self, backend: Backend, case: case_gen.ConformanceCase) -> list[Outcome]:
        if backend.name == checks.REFERENCE_EXECUTOR:
            if id(case) not in self._on_cpu:
                self._on_cpu[id(case)] = checks.run_case(backend, case)
            return list(self._on_cpu[id(case)] or [])
        return checks.run_case(backend, case)

    def _cpu(self, case: case_gen.ConformanceCase) -> list[Outcome] | None:
        """``case`` on the reference executor, run once (also when cpu is not checked)."""
        if id(case) not in self._on_cpu:
            self._on_cpu[id(case)] = checks.reference_outcomes(case)
        return self._on_cpu[id(case)]

    def _onnx(self, backend: Backend, ops: list[tuple[str, Any]]) -> None:
        _, path = onnx_tests.adapter_module()
        self.report.meta["onnx_node_tests_path"] = path
        types = {op.op_type for _, op in ops}
        for k, (op_type, outcome) in enumerate(onnx_tests.run_tests(backend, types)):
            self.progress.step(f"{backend.name}: ONNX node tests", k + 1)
            self.add(ONNX, op_type, backend.name, outcome)


def _csv(values: Sequence[str] | None) -> list[str] | None:
    if not values:
        return None
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def unknown_backends(names: Sequence[str], registered: Sequence[str]) -> str | None:
    """The error for backend names nothing registered (with the plugins that failed to
    load, which may be why), or None."""
    from spawnml.plugins import get_plugin_manager

    unknown = [n for n in names if n not in registered]
    if not unknown:
        return None
    which = ", ".join(repr(n) for n in unknown)
    subject = f"backend {which} is" if len(unknown) == 1 else f"backends {which} are"
    message = (f"{subject} not registered "
               f"(registered: {', '.join(sorted(registered)) or 'none'})")
    for record in get_plugin_manager().failed():
        how = "failed" if record.loaded else "failed to load"
        message += f"; plugin {record.name!r} {how}: {record.error}"
    return message


def _read_baseline(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        found = json.load(f)
    if not isinstance(found, dict) or "sections" not in found:
        raise ValueError(f"{path}: not a matrix written by --json")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """``spawnml-conformance``: parse ``argv`` and run."""
    return run(build_parser().parse_args(argv))


def run(args: argparse.Namespace, prog: str = "spawnml-conformance") -> int:
    """Run what ``args`` (parsed by a parser with :func:`add_arguments`) asks for; print the
    matrix (or, with ``--summary``, only the summary) and the result line; the exit status."""
    config = Config(
        backends=_csv(args.backend),
        ops=_csv(args.ops),
        onnx_node_tests=args.onnx_node_tests,
        compile_only=set(_csv([args.compile_only]) or []),
        max_cases=args.max_cases,
        kernels=not args.no_kernels,
        reference_check=not args.no_reference_check,
        progress=not args.quiet,
    )
    diagnostics = Diagnostics(args.log)
    try:
        baseline = _read_baseline(args.baseline) if args.baseline else None
        diagnostics.open()
    except (OSError, ValueError) as exc:  # an unreadable baseline, an unwritable log file
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    try:
        with diagnostics:
            report = Runner(config, diagnostics).run()
    except SpawnMLError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            f.write(report.to_json())
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(markdown_page(report, command_line(args)))
    lines, result = report.summary(baseline, args.baseline or "", args.markdown or "")
    if not args.summary:
        print(report.to_text())
        if baseline is not None:
            lines = report.failure_lines() + lines
    print("\n".join([*lines, diagnostics.describe(), peak_memory(), result]))
    if baseline is not None:
        return 1 if report.compare(baseline).regressions else 0
    return 1 if report.failed else 0


def peak_memory() -> str:
    """The run's peak resident memory: cases stream through, so it stays flat (#20)."""
    import resource

    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return f"peak memory: {peak_kib / 1024:.0f} MiB resident (this process)"


def markdown_page(report: Report, command: str) -> str:
    """A whole page: title, how it was produced (``command``) and how to read it, the matrix."""
    from .tolerances import FLOORS

    meta = ", ".join(f"{k}: {v}" for k, v in report.meta.items())
    floors = ", ".join(f"{dt} rtol {t.rtol:g} atol {t.atol:g}" for dt, t in FLOORS.items())
    return (
        "# Conformance matrix\n\n"
        f"Generated by `{command}` ({meta}). Do not edit: regenerate it.\n\n"
        "* **kernel suite**: `spawnml.testing.kernel_suite`, the whole kernel language.\n"
        "* **operators**: per op, its own `cases()`, shapes generated from a declared "
        "elementwise domain (scalars, size-0/1 dims, broadcasting), and the inputs of its "
        "official ONNX node tests; each float32 case again in every declared dtype and with "
        "NaN/±Inf/±0, subnormal, large and huge values injected; sampled per op (every kind "
        "kept). Compared with the op's numpy reference; the `onnx.reference` column "
        "cross-checks that reference.\n"
        "* **ONNX node tests**: the official single-node tests of the onnx wheel.\n\n"
        "Cells: `pass n/total`, `FAIL k/total (first failing case, max err)`, or why a row "
        "is skipped, not implemented or computed on the host. Exclusions come only from "
        "declared capabilities and are listed at the end with the reason. Tolerances (never "
        f"undercut by a case): {floors}; integers and bool exact; NaN and ±Inf must match.\n\n"
        + report.to_markdown()
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
