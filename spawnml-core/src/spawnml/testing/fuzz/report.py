"""Aggregate outcomes: counts per backend and class, distinct bug groups with reproducible
examples, JSON and a human summary.

A bug group is (class, exception type or mismatch kind, innermost spawnml frame or the op
whose output differs). ``reproduce(kind, seed)`` rebuilds the exact case of an example.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cases import Case, make_case, save_case
from .oracle import BOTH_REJECTED, CLASSES, CRASH, FATAL, FOREIGN, HANG, OK, Outcome

QUIET_CLASSES = frozenset({OK, BOTH_REJECTED})
"""Classes that form no groups: nothing to fix."""


def reproduce(kind: str, seed: int) -> Case:
    """The exact case (model bytes and feeds) of a reported example."""
    return make_case(kind, seed)


@dataclass
class Group:
    """Outcomes sharing one key, with the first message and a few examples."""

    cls: str
    error_type: str
    where: str
    count: int = 0
    backends: set[str] = field(default_factory=set)
    message: str = ""
    examples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def fatal(self) -> bool:
        return self.cls in FATAL

    def key_text(self) -> str:
        return f"{self.cls}|{self.error_type}|{self.where}"

    def to_dict(self) -> dict[str, Any]:
        return {"class": self.cls, "error_type": self.error_type, "where": self.where,
                "count": self.count, "backends": sorted(self.backends),
                "message": self.message, "fatal": self.fatal, "examples": self.examples}


class Report:
    """Collects outcomes as they arrive."""

    def __init__(self, examples: int = 3) -> None:
        self.max_examples = examples
        self.counts: dict[str, Counter[str]] = {}
        self.groups: dict[tuple[str, str, str], Group] = {}

    def add(self, outcome: Outcome) -> None:
        self.counts.setdefault(outcome.backend, Counter())[outcome.cls] += 1
        if outcome.cls in QUIET_CLASSES:
            return
        group = self.groups.setdefault(outcome.key, Group(*outcome.key))
        group.count += 1
        group.backends.add(outcome.backend)
        if not group.message:
            group.message = outcome.message
        if len(group.examples) < self.max_examples:
            group.examples.append({
                "kind": outcome.kind, "seed": outcome.seed, "backend": outcome.backend,
                "label": outcome.label[:300], "message": outcome.message,
                "detail": outcome.detail[:1500], "stage": outcome.stage})

    def extend(self, outcomes: Iterable[Outcome]) -> Report:
        for outcome in outcomes:
            self.add(outcome)
        return self

    @property
    def fatal(self) -> int:
        """How many outcomes are in a FATAL class."""
        return sum(n for c in self.counts.values() for cls, n in c.items() if cls in FATAL)

    def sorted_groups(self) -> list[Group]:
        """Fatal groups first, then by size."""
        return sorted(self.groups.values(), key=lambda g: (not g.fatal, -g.count, g.key_text()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "counts": {b: {cls: c[cls] for cls in CLASSES if c[cls]}
                       for b, c in sorted(self.counts.items())},
            "fatal": self.fatal,
            "groups": [g.to_dict() for g in self.sorted_groups()],
        }

    def write_json(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1, default=str) + "\n")

    def save_examples(self, directory: str | Path, classes: Iterable[str]) -> list[Path]:
        """Save each example of the groups in ``classes`` (model, feeds, json) under
        ``directory``; returns the .onnx paths."""
        wanted = set(classes)
        paths = []
        for group in self.sorted_groups():
            if group.cls not in wanted:
                continue
            for ex in group.examples:
                case = reproduce(ex["kind"], ex["seed"])
                paths.append(save_case(case, directory,
                                       f"{group.cls}-{ex['backend']}-{ex['kind']}-{ex['seed']}"))
        return paths

    def summary(self) -> str:
        """Counts per backend, then one block per group with its reproducers."""
        lines = []
        for backend, counts in sorted(self.counts.items()):
            total = sum(counts.values())
            parts = ", ".join(f"{cls} {counts[cls]}" for cls in CLASSES if counts[cls])
            lines.append(f"{backend}: {total} cases: {parts}")
        lines.append(f"{len(self.groups)} group(s), {self.fatal} fatal outcome(s)")
        for group in self.sorted_groups():
            mark = "FATAL " if group.fatal else ""
            lines.append(f"\n{mark}[{group.cls}] {group.error_type} at {group.where or '-'} "
                         f"x{group.count} on {','.join(sorted(group.backends))}")
            if group.message:
                lines.append(f"  message: {group.message[:200]}")
            for ex in group.examples:
                lines.append(f"  reproduce: --reproduce {ex['kind']}:{ex['seed']} "
                             f"--backends {ex['backend']}   ({ex['label'][:100]})")
            if group.examples and group.examples[0]["detail"] and group.cls not in (CRASH, HANG):
                what = "innermost frame" if group.cls == FOREIGN else "detail"
                lines.append(f"  {what}: {group.examples[0]['detail'][:300]}")
        return "\n".join(lines)
