"""Profiles of runs: per kernel (the nodes it computes, backend, count, time, bytes moved),
launches per run, and host time against device time.

``InferenceSession.run(..., profile=True)`` adds a run to the session's profile;
``InferenceSession.profile()`` returns it (``.table()``, ``.as_dict()``, ``.json()``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

MEASURED = frozenset({"events", "timestamps", "queries"})  # timed by the device itself
DEVICE_TIMING = {
    "events": "measured by the device (OpenCL profiling events)",
    "timestamps": "measured by the device (WebGPU timestamp queries)",
    "queries": "measured by the device (GL timer queries, EXT_disjoint_timer_query)",
    "synchronous": "kernels run on the calling thread: device time is each launch call's "
    "time, its call overhead included",
    "synchronize": "not measured by the device: each launch is followed by synchronize and "
    "device time is the wait after the launch call returned",
    "host": "computed on the host",
}


@dataclass
class KernelRow:
    """One launched kernel (or host step) of the plan, summed over the profiled runs."""

    nodes: list[str]  # the graph nodes it computes (every node of a fused kernel)
    op_types: list[str]
    backend: str  # a backend name or "host"
    kernel: str  # the kernel's name ("" for host work)
    kind: str  # launch, kernel (backend-specific), host, upload, download, transfer
    count: int = 0
    call_s: float = 0.0  # host time spent in the launch call
    device_s: float = 0.0  # device time (see the profile's device_timing)
    bytes: int = 0  # bytes read + written, summed over the count

    @property
    def mean_s(self) -> float:
        return (self.call_s + self.device_s) / max(self.count, 1)

    def as_dict(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "op_types": self.op_types,
            "backend": self.backend,
            "kernel": self.kernel,
            "kind": self.kind,
            "count": self.count,
            "call_s": self.call_s,
            "device_s": self.device_s,
            "total_s": self.call_s + self.device_s,
            "mean_s": self.mean_s,
            "bytes": self.bytes,
        }


@dataclass
class Profile:
    """What the profiled runs did: per-kernel rows in execution order and run totals."""

    model_nodes: int = 0  # nodes of the model as loaded (before fusion and folding)
    rows: list[KernelRow] = field(default_factory=list)
    runs: int = 0
    run_s: float = 0.0  # wall time of the profiled runs
    launches: int = 0  # kernel launches issued over the profiled runs
    replayed_runs: int = 0  # runs that replayed a recorded plan
    timing: dict[str, str] = field(default_factory=dict)  # backend -> device timing method
    _index: dict[Any, KernelRow] = field(default_factory=dict, repr=False)

    # -- recording (graph.record / graph.runtime) ------------------------------------------
    def row(self, key: Any, make: Any) -> KernelRow:
        found = self._index.get(key)
        if found is None:
            found = self._index[key] = make()
            self.rows.append(found)
        return found

    def add(
        self, key: Any, make: Any, call_s: float, device_s: float, nbytes: int, launches: int
    ) -> None:
        row = self.row(key, make)
        row.count += 1
        row.call_s += call_s
        row.device_s += device_s
        row.bytes += nbytes
        self.launches += launches

    # -- reading ---------------------------------------------------------------------------
    @property
    def launches_per_run(self) -> float:
        return self.launches / max(self.runs, 1)

    @property
    def device_s(self) -> float:
        """Device time of every launch over the profiled runs."""
        return sum(r.device_s for r in self.rows if r.kind in ("launch", "kernel"))

    @property
    def host_s(self) -> float:
        """Everything else: wall time of the runs minus device time."""
        return max(self.run_s - self.device_s, 0.0)

    @property
    def device_timing(self) -> str:
        """The timing method ("events", "synchronous", ...; methods joined by "+" when the
        backends differ)."""
        return "+".join(sorted(set(self.timing.values()))) or "none"

    def as_dict(self) -> dict[str, Any]:
        runs = max(self.runs, 1)
        return {
            "model_nodes": self.model_nodes,
            "runs": self.runs,
            "replayed_runs": self.replayed_runs,
            "launches": self.launches,
            "launches_per_run": self.launches_per_run,
            "run_s": self.run_s,
            "run_s_per_run": self.run_s / runs,
            "host_s": self.host_s,
            "device_s": self.device_s,
            "host_s_per_run": self.host_s / runs,
            "device_s_per_run": self.device_s / runs,
            "device_timing": {
                b: {"method": m, "meaning": DEVICE_TIMING.get(m, m)}
                for b, m in sorted(self.timing.items())
            },
            "kernels": [r.as_dict() for r in self.rows],
        }

    def json(self, indent: int | None = 2) -> str:
        return json.dumps(self.as_dict(), indent=indent)

    def table(self, limit: int | None = None, sort: str = "order") -> str:
        """A text table per kernel (``sort="time"``: slowest first; ``limit``: top rows)
        followed by the run totals."""
        runs = max(self.runs, 1)
        rows = list(self.rows)
        if sort == "time":
            rows.sort(key=lambda r: -(r.call_s + r.device_s))
        shown = rows[:limit] if limit else rows
        header = ["#", "nodes", "op", "backend", "kernel", "count", "call us", "device us",
                  "mean us", "bytes/run"]  # fmt: skip
        body = []
        for i, r in enumerate(shown):
            nodes = ", ".join(r.nodes)
            body.append([
                str(i), nodes if len(nodes) <= 48 else nodes[:45] + "...",
                "+".join(dict.fromkeys(r.op_types)), r.backend, r.kernel[:32], str(r.count),
                f"{r.call_s / runs * 1e6:.1f}", f"{r.device_s / runs * 1e6:.1f}",
                f"{r.mean_s * 1e6:.1f}", str(r.bytes // runs),
            ])  # fmt: skip
        widths = [max(len(h), *(len(row[c]) for row in body)) if body else len(h)
                  for c, h in enumerate(header)]  # fmt: skip
        lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
        lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in body]
        if limit and len(rows) > limit:
            lines.append(f"... {len(rows) - limit} more rows")
        lines.append("")
        lines.append(
            f"runs {self.runs} (replayed from a recorded plan: {self.replayed_runs}); "
            f"launches per run {self.launches_per_run:g}; model nodes {self.model_nodes}"
        )
        lines.append(
            f"per run: wall {self.run_s / runs * 1e3:.3f} ms = host {self.host_s / runs * 1e3:.3f}"
            f" ms + device {self.device_s / runs * 1e3:.3f} ms"
        )
        for backend, method in sorted(self.timing.items()):
            lines.append(f"device time on {backend}: {method} ({DEVICE_TIMING.get(method, '')})")
        return "\n".join(lines)
