"""The op × backend matrix: cells built from outcomes, rendered as text, markdown and JSON."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .checks import DISAGREES, FAIL, HOST, NOT_IMPLEMENTED, PASS, SKIP, XFAIL, Outcome

# Sections of the report, in display order.
KERNELS, OPS, ONNX = "kernel suite", "operators", "ONNX node tests"
REFERENCE = "onnx.reference"  # the pseudo-backend column of the reference cross-check


@dataclass
class Cell:
    """All outcomes of one row on one backend, summarised."""

    counts: Counter[str] = field(default_factory=Counter)
    max_error: float = 0.0
    first_failure: Outcome | None = None
    first_noted: Outcome | None = None  # the first XFAIL or DISAGREES (they decide nothing)
    reasons: Counter[str] = field(default_factory=Counter)  # skip / not-implemented / host

    def add(self, outcome: Outcome) -> None:
        self.counts[outcome.status] += 1
        if outcome.max_error is not None and outcome.status in (PASS, FAIL, XFAIL, DISAGREES):
            self.max_error = max(self.max_error, outcome.max_error)
        if outcome.status == FAIL and self.first_failure is None:
            self.first_failure = outcome
        elif outcome.status in (XFAIL, DISAGREES) and self.first_noted is None:
            self.first_noted = outcome
        elif outcome.status in (SKIP, NOT_IMPLEMENTED, HOST):
            self.reasons[f"{outcome.status}: {outcome.detail}"] += 1

    @property
    def status(self) -> str:
        for status in (FAIL, DISAGREES, XFAIL, PASS, HOST, NOT_IMPLEMENTED, SKIP):
            if self.counts[status]:
                return status
        return SKIP

    def short(self) -> str:
        """One line for a table cell."""
        c, total = self.counts, sum(self.counts.values())
        status = self.status
        if status == FAIL:
            f = self.first_failure
            assert f is not None
            err = "" if f.max_error is None else f", max err {f.max_error:.3g}"
            return f"FAIL {c[FAIL]}/{total} ({f.case}{err})"
        if status in (XFAIL, DISAGREES):
            f = self.first_noted
            assert f is not None
            err = "" if f.max_error is None else f", max err {f.max_error:.3g}"
            word = "xfail" if status == XFAIL else "DISAGREES"
            return f"{word} {c[status]}/{total} ({f.case}{err})"
        if status == PASS:
            extra = f", {c[SKIP]} skipped" if c[SKIP] else ""
            return f"pass {c[PASS]}/{total}{extra}"
        reason = self.reasons.most_common(1)[0][0] if self.reasons else status
        return reason if len(reason) < 70 else reason[:67] + "..."

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "counts": dict(self.counts),
            "max_error": self.max_error,
            "first_failure": self.first_failure.as_dict() if self.first_failure else None,
            **({"first_noted": self.first_noted.as_dict()} if self.first_noted else {}),
            "reasons": dict(self.reasons),
        }


@dataclass
class Column:
    """One backend: how it was checked (run, compile-only) or why it was not."""

    name: str
    mode: str  # "run", "compile-only" or "unavailable"
    device: str = ""
    reason: str = ""


@dataclass
class Comparison:
    """Cells ("section / row on backend") against a baseline: failing now only (regressions,
    with their status there), failing in both (known), failing there and passing now."""

    regressions: list[tuple[str, str]] = field(default_factory=list)
    known: list[str] = field(default_factory=list)
    newly_passing: list[str] = field(default_factory=list)


@dataclass
class Report:
    columns: list[Column] = field(default_factory=list)
    sections: dict[str, dict[str, dict[str, Cell]]] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def cell(self, section: str, row: str, column: str) -> Cell:
        return self.sections.setdefault(section, {}).setdefault(row, {}).setdefault(column, Cell())

    def add(self, section: str, row: str, column: str, outcome: Outcome) -> None:
        self.cell(section, row, column).add(outcome)

    @property
    def failed(self) -> bool:
        return any(c.status == FAIL for rows in self.sections.values()
                   for cells in rows.values() for c in cells.values())

    def failures(self) -> list[tuple[str, str, str, Outcome]]:
        return [(s, r, b, c.first_failure) for s, rows in self.sections.items()
                for r, cells in rows.items() for b, c in cells.items() if c.first_failure]

    def noted(self, status: str) -> list[tuple[str, str, str, Outcome]]:
        """Cells whose status is ``status`` (XFAIL or DISAGREES), with their first case."""
        return [(s, r, b, c.first_noted) for s, rows in self.sections.items()
                for r, cells in rows.items() for b, c in cells.items()
                if c.status == status and c.first_noted]

    def failure_lines(self) -> list[str]:
        """One line per failing cell: its first failing case and why."""
        return [f"FAIL {s} / {r} on {b}: {f.case}: {f.detail}" for s, r, b, f in self.failures()]

    def noted_lines(self) -> list[str]:
        """One line per xfail cell (an op issue: it fails on cpu too) and per reference
        disagreement (op.reference vs onnx.reference): reported, never deciding the result."""
        return ([f"XFAIL {s} / {r} on {b}: {f.case}: {f.detail}"
                 for s, r, b, f in self.noted(XFAIL)]
                + [f"REFERENCE DISAGREES {s} / {r}: {f.case}: {f.detail}"
                   for s, r, b, f in self.noted(DISAGREES)])

    def _noted_counts(self) -> str:
        x, d = len(self.noted(XFAIL)), len(self.noted(DISAGREES))
        parts = ([f"{x} xfail cell(s) (op issues: failing on cpu too)"] if x else []) + \
            ([f"{d} reference disagreement(s) (op.reference vs onnx.reference)"] if d else [])
        return f" ({', '.join(parts)}: reported, not deciding)" if parts else ""

    def compare(self, baseline: dict[str, Any]) -> Comparison:
        """This run against ``baseline`` (a previous ``to_json`` run), cell by cell."""
        old = baseline.get("sections", {})
        found = Comparison()
        for s, rows in self.sections.items():
            for r, cells in rows.items():
                for b, c in cells.items():
                    before = old.get(s, {}).get(r, {}).get(b, {}).get("status")
                    where = f"{s} / {r} on {b}"
                    if c.status == FAIL and before == FAIL:
                        found.known.append(where)
                    elif c.status == FAIL:
                        found.regressions.append((where, before or "absent"))
                    elif before == FAIL and c.status == PASS:
                        found.newly_passing.append(f"{where} (was {FAIL})")
        return found

    def regressions(self, baseline: dict[str, Any]) -> list[str]:
        """Cells failing now that did not fail in ``baseline`` (a previous ``to_json`` run):
        known failures stay reported as failures, new ones are listed here."""
        return [f"{where} (was {before})" for where, before in self.compare(baseline).regressions]

    def summary(self, baseline: dict[str, Any] | None = None, baseline_name: str = "",
                listed_in: str = "") -> tuple[list[str], str]:
        """(lines naming the cells that decide the result, the result line). Without a
        baseline every failing cell decides; with one, only the regressions (the known
        failures are counted, and listed in the matrix: ``listed_in`` names where)."""
        noted = self._noted_counts()
        if baseline is None:
            lines = self.failure_lines()
            if not lines:
                return self.noted_lines(), "result: passed" + noted
            return lines + self.noted_lines(), (f"result: FAILED: {len(lines)} failing cell(s) "
                                                f"(FAIL lines above){noted}")
        cmp = self.compare(baseline)
        first = {f"{s} / {r} on {b}": f for s, r, b, f in self.failures()}
        lines = [f"REGRESSION {where} (was {before}): {first[where].case}: {first[where].detail}"
                 for where, before in cmp.regressions]
        lines += [f"NEWLY PASSING {x}" for x in cmp.newly_passing]
        lines += self.noted_lines()
        where = f" (listed in {listed_in})" if listed_in and cmp.known else ""
        counts = (f"{len(cmp.known)} known failure(s){where}, "
                  f"{len(cmp.newly_passing)} newly passing")
        if cmp.regressions:
            return lines, (f"result: FAILED against the baseline {baseline_name}: "
                           f"{len(cmp.regressions)} regression(s) (REGRESSION lines above), "
                           f"{counts}{noted}")
        return lines, (f"result: passed against the baseline {baseline_name}: 0 regressions, "
                       f"{counts}{noted}")

    def exclusions(self) -> list[tuple[str, str, str, str, int]]:
        """(section, row, backend, reason, count) for every skipped / not implemented case."""
        return [(s, r, b, reason, n) for s, rows in self.sections.items()
                for r, cells in rows.items() for b, c in cells.items()
                for reason, n in sorted(c.reasons.items())]

    def _columns(self, section: str) -> list[str]:
        names = [c.name for c in self.columns]
        seen = {b for cells in self.sections[section].values() for b in cells}
        return ([REFERENCE] if REFERENCE in seen else []) + [n for n in names if n in seen]

    # -- renderers ------------------------------------------------------------------------
    def to_json(self) -> str:
        return json.dumps({
            "meta": self.meta,
            "backends": [c.__dict__ for c in self.columns],
            "sections": {s: {r: {b: c.as_dict() for b, c in cells.items()}
                             for r, cells in rows.items()} for s, rows in self.sections.items()},
            "failed": self.failed,
        }, indent=1, default=str)

    def to_text(self) -> str:
        out = [_backend_lines(self.columns)]
        for section, rows in self.sections.items():
            if not rows:
                continue
            cols = self._columns(section)
            table = [[row] + [rows[row][c].short() if c in rows[row] else "-" for c in cols]
                     for row in rows]
            widths = [max(len(x) for x in col) for col in zip([section, *cols], *table)]
            widths = [min(w, 60) for w in widths]
            out += ["", _row([section, *cols], widths), _row(["-" * w for w in widths], widths)]
            out += [_row(r, widths) for r in table]
        return "\n".join(out)

    def to_markdown(self) -> str:
        out = ["## Backends", "", "| backend | checked | device / reason |", "|---|---|---|"]
        out += [f"| {c.name} | {c.mode} | {_md(c.device or c.reason)} |" for c in self.columns]
        for section, rows in self.sections.items():
            if not rows:
                continue
            cols = self._columns(section)
            out += ["", f"## {section}", "", "| | " + " | ".join(cols) + " |",
                    "|---" * (len(cols) + 1) + "|"]
            for row, cells in rows.items():
                out.append(f"| {row} | " + " | ".join(
                    _md(_emoji(cells[c]) + cells[c].short()) if c in cells else "-"
                    for c in cols) + " |")
        failures = self.failures()
        if failures:
            out += ["", "## Failures", "",
                    "| section | row | backend | case | max error | detail |",
                    "|---|---|---|---|---|---|"]
            out += [f"| {s} | {r} | {b} | {_md(f.case)} | {f.max_error} | {_md(f.detail[:200])} |"
                    for s, r, b, f in failures]
        for status, title, head in (
            (XFAIL, "Expected failures (op issues: the case fails on cpu too)", "backend"),
            (DISAGREES, "Reference disagreements (op.reference vs onnx.reference; they never "
             "decide the exit status)", "column"),
        ):
            noted = self.noted(status)
            if noted:
                out += ["", f"## {title}", "",
                        f"| section | row | {head} | case | max error | detail |",
                        "|---|---|---|---|---|---|"]
                out += [f"| {s} | {r} | {b} | {_md(f.case)} | {f.max_error} | "
                        f"{_md(f.detail[:200])} |" for s, r, b, f in noted]
        excl = self.exclusions()
        if excl:
            out += ["", "## Exclusions and not implemented (with the reason)", "",
                    "| section | row | backend | cases | reason |", "|---|---|---|---|---|"]
            out += [f"| {s} | {r} | {b} | {n} | {_md(reason[:200])} |"
                    for s, r, b, reason, n in excl]
        return "\n".join(out) + "\n"


def _row(cells: list[str], widths: list[int]) -> str:
    return "  ".join(x[:w].ljust(w) for x, w in zip(cells, widths)).rstrip()


def _emoji(cell: Cell) -> str:
    return {PASS: "✅ ", FAIL: "❌ ", XFAIL: "⚠️ ", DISAGREES: "≠ ", SKIP: "⏭ ",
            NOT_IMPLEMENTED: "— ", HOST: "🖥 "}[cell.status]


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _backend_lines(columns: list[Column]) -> str:
    return "\n".join(f"{c.name:8s} {c.mode:12s} {c.device or c.reason}" for c in columns)
