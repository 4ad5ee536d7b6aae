"""Figures of results: ``spawnml bench`` timings and per-kernel profiles, as PNG (or any
format matplotlib writes, by the file's suffix).

Needs the ``plot`` extra (``pip install 'spawnml-core[plot]'``, matplotlib). Figures are drawn
on the Agg canvas without pyplot, so nothing leaks into pyplot's global state.
``bench_bars`` and ``profile_bars`` compute the bars the figures draw, without matplotlib.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import MissingDependencyError
from .profile import Profile

DPI = 110
OTHER = "other"  # the group of the bar that sums the kernels past the limit


@dataclass(frozen=True)
class Bar:
    """One bar of a figure: ``value`` is a time ratio to the peer or milliseconds (bench),
    or milliseconds per run (profile); ``failed`` bars (an error, so no value) are drawn as
    hatched "error" markers, with ``note`` the error."""

    label: str  # the backend (bench) or kernel (profile)
    value: float  # nan when failed
    group: str  # the model (bench) or backend (profile)
    failed: bool = False
    note: str = ""


# ------------------------------------------------------------------------------ numbers


def contenders(data: Mapping[str, Any]) -> list[str]:
    """The backends of a ``spawnml bench --json`` result, peer excluded: the order of
    ``geomean_ratio``, then of first appearance in the results."""
    peer = data.get("against")
    names = dict.fromkeys(data.get("geomean_ratio") or {})
    for entry in data["results"]:
        names.update(dict.fromkeys([*entry.get("median_ms", {}), *entry.get("errors", {})]))
    names.pop(peer, None)
    return list(names)


def bench_bars(data: Mapping[str, Any]) -> list[Bar]:
    """The bars of ``plot_bench``: per model (``group``), one per backend (``label``). With a
    peer (``data["against"]``) the value is the time ratio backend/peer, else the median
    milliseconds. A backend that failed, or whose peer failed, is kept as a failed bar."""
    peer = data.get("against")
    bars = []
    for entry in data["results"]:
        ms, errors = entry.get("median_ms", {}), entry.get("errors", {})
        for name in contenders(data):
            if name not in ms:
                note = errors.get(name, "not run")
                bars.append(Bar(name, math.nan, entry["model"], True, note))
            elif peer and peer not in ms:
                note = f"{peer}: {errors.get(peer, 'not run')}"
                bars.append(Bar(name, math.nan, entry["model"], True, note))
            else:
                value = ms[name] / ms[peer] if peer else ms[name]
                bars.append(Bar(name, float(value), entry["model"]))
    return bars


def _kernel_label(row: Mapping[str, Any]) -> str:
    nodes, ops = row["nodes"], "+".join(dict.fromkeys(row["op_types"]))
    first = (nodes[0] if nodes else "?") + (f" +{len(nodes) - 1}" if len(nodes) > 1 else "")
    name = row["kernel"][:32]
    return f"{name}: {first} ({ops})" if name and name != ops else f"{first} ({ops})"


def _kernel_totals(data: Mapping[str, Any]) -> list[tuple[Mapping[str, Any], float]]:
    """(row, seconds) per kernel: rows of the same kernel on the same nodes (a normal run's
    and a replayed run's) summed, slowest first."""
    totals: dict[tuple, list] = {}
    for r in data["kernels"]:
        key = (r["backend"], r["kind"], r["kernel"], tuple(r["nodes"]), tuple(r["op_types"]))
        totals.setdefault(key, [r, 0.0])[1] += r["call_s"] + r["device_s"]
    return sorted(((r, t) for r, t in totals.values()), key=lambda rt: -rt[1])


def _profile_dict(profile: Profile | Mapping[str, Any]) -> Mapping[str, Any]:
    return profile.as_dict() if isinstance(profile, Profile) else profile


def profile_bars(profile: Profile | Mapping[str, Any], limit: int = 20) -> list[Bar]:
    """The bars of ``plot_profile``: the ``limit`` slowest kernels (host time of the launch
    call + device time, milliseconds per run, the rows of one kernel on the same nodes
    summed), slowest first, then one bar "other N kernels" summing the rest. ``profile`` is
    a Profile or its ``as_dict()``/``json()`` data."""
    data = _profile_dict(profile)
    runs = max(data["runs"], 1)
    totals = _kernel_totals(data)
    rows = [r for r, _ in totals]
    ms = [t / runs * 1e3 for _, t in totals]
    limit = max(limit, 0)
    bars = [Bar(_kernel_label(r), t, r["backend"]) for r, t in zip(rows[:limit], ms)]
    if len(rows) > limit:
        rest = len(rows) - limit
        label = f"other {rest} kernel" + ("s" if rest > 1 else "")
        bars.append(Bar(label, math.fsum(ms[limit:]), OTHER))
    return bars


# ------------------------------------------------------------------------------ drawing


def require_matplotlib() -> None:
    """Raise MissingDependencyError unless matplotlib can be imported (a CLI can check this
    before a long bench rather than after it)."""
    try:
        import matplotlib.backends.backend_agg
        import matplotlib.figure  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError(
            "plots need matplotlib, the 'plot' extra: pip install 'spawnml-core[plot]'"
        ) from exc


def _figure(width: float, height: float) -> Any:
    """A matplotlib Figure on its own Agg canvas (no pyplot)."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, path: str | os.PathLike[str]) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=DPI)
    return out


def _colours(names: list[str]) -> dict[str, Any]:
    from matplotlib import colormaps

    palette = colormaps["tab10"].colors
    return {name: palette[i % len(palette)] for i, name in enumerate(names)}


def _patches(colours: Mapping[str, Any]) -> list[Any]:
    """Legend handles: one colour patch per name."""
    from matplotlib.patches import Patch

    return [Patch(color=c) for c in colours.values()]


def _ratio_text(ratio: float) -> str:
    return f"x{ratio:.0f}" if ratio >= 10 else f"x{ratio:.2g}"


def _ms_text(ms: float) -> str:
    return f"{ms:.0f} ms" if ms >= 100 else f"{ms:.3g} ms"


def plot_bench(data: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Draw ``spawnml bench --json`` data (the dict it writes) to ``path``; return the path.

    With a peer: per model, one bar per backend of its time ratio to the peer (log scale,
    bars grow from the line at x1, labelled "x2.9"), the peer's median under each model.
    Without: median milliseconds per backend (log scale). Failed runs are hatched "error"
    bars. The title holds the geometric-mean ratios."""
    bars = bench_bars(data)
    peer = data.get("against")
    models = [e["model"] for e in data["results"]]
    names = contenders(data)
    fig = _figure(max(6.0, 1.6 * len(models)), 4.5)
    ax = fig.add_subplot()
    ax.set_yscale("log")
    colours = _colours(names)
    values = [b.value for b in bars if not b.failed]
    base = 1.0 if peer else min(values, default=1.0) / 3
    top = max([*values, base * 10]) if values else base * 10
    width = 0.8 / max(len(names), 1)
    for bar in bars:
        x = models.index(bar.group) + (names.index(bar.label) - (len(names) - 1) / 2) * width
        if bar.failed:  # a short hatched stub from the base line, marked "error"
            stub = base * (top / base) ** 0.2
            ax.bar(x, stub - base, width, bottom=base, fill=False, hatch="///",
                   edgecolor=colours[bar.label], linewidth=0.6)  # fmt: skip
            ax.text(x, stub, "error", rotation=90, ha="center", va="bottom", fontsize=7,
                    color="dimgray")  # fmt: skip
            continue
        ax.bar(x, bar.value - base, width, bottom=base, color=colours[bar.label])
        text = _ratio_text(bar.value) if peer else _ms_text(bar.value)
        above = bar.value >= base
        ax.text(x, bar.value, text, ha="center", va="bottom" if above else "top", fontsize=7)
    ticks = list(models)
    if peer:
        ax.axhline(1.0, color="black", linewidth=0.8)
        for i, entry in enumerate(data["results"]):
            ms = entry.get("median_ms", {})
            peer_time = _ms_text(ms[peer]) if peer in ms else "error"
            ticks[i] = f"{entry['model']}\n{peer} {peer_time}"
        ax.set_ylabel(f"time / {peer} time (lower is better)")
    else:
        ax.set_ylabel("median time (ms)")
    ax.set_xticks(range(len(models)), ticks, fontsize=8)
    ax.set_xlim(-0.6, len(models) - 0.4)
    lows = [v for v in values if v < base]
    ax.set_ylim(min([*lows, base]) / 1.6, top * 2)
    ax.legend(_patches(colours), names, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    geomean = data.get("geomean_ratio") or {}
    title = "spawnml bench" + (f": time ratio to {peer}" if peer else ": median time")
    if geomean:
        parts = ", ".join(f"{b} {_ratio_text(r)}" for b, r in geomean.items())
        title += f"\ngeometric mean: {parts}"
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", which="major", alpha=0.3)
    fig.tight_layout()
    return _save(fig, path)


def plot_profile(
    profile: Profile | Mapping[str, Any], path: str | os.PathLike[str], limit: int = 20
) -> Path:
    """Draw a profile's per-kernel time to ``path`` (horizontal bars of milliseconds per run,
    slowest first, the ``limit`` slowest and "other N kernels", coloured by backend, host and
    device time per run in the title); return the path. ``profile`` is a Profile or its
    ``as_dict()``/``json()`` data."""
    data = _profile_dict(profile)
    bars = profile_bars(data, limit)
    fig = _figure(8.0, max(3.0, 0.28 * len(bars) + 1.6))
    ax = fig.add_subplot()
    groups = list(dict.fromkeys(b.group for b in bars if b.group != OTHER))
    colours = {**_colours(groups), OTHER: "lightgray"}
    y = range(len(bars))
    ax.barh(y, [b.value for b in bars], color=[colours[b.group] for b in bars])
    ax.set_yticks(y, [b.label for b in bars], fontsize=7)
    ax.invert_yaxis()  # slowest on top
    ax.margins(x=0.1)  # room for the value labels
    ax.set_xlabel("time per run (ms): launch call + device")
    for i, bar in enumerate(bars):
        ax.text(bar.value, i, f" {bar.value:.3g}", va="center", fontsize=6)
    shown = {g: c for g, c in colours.items() if g in {b.group for b in bars}}
    ax.legend(_patches(shown), list(shown), fontsize=7, loc="lower right")
    runs = max(data["runs"], 1)
    title = f"spawnml profile: {data['runs']} run(s), {len(_kernel_totals(data))} kernels"
    if data.get("run_s"):
        timing = "+".join(sorted({t["method"] for t in data.get("device_timing", {}).values()}))
        title += (
            f"\nper run: wall {data['run_s'] / runs * 1e3:.3g} ms = host "
            f"{data['host_s'] / runs * 1e3:.3g} ms + device {data['device_s'] / runs * 1e3:.3g} ms"
            + (f" ({timing})" if timing else "")
        )
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return _save(fig, path)
