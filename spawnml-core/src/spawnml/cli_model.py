"""The model commands of the ``spawnml`` CLI: ``info``, ``run`` and ``bench``."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .errors import InvalidInputError, SpawnMLError
from .registry import get_available_backends

Table = Callable[[list[list[str]], list[str]], str]


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.2f} MiB" if n >= 1 << 20 else f"{n / 1024:.1f} KiB"


def _shape_str(shape: Any) -> str:
    return "?" if shape is None else "[" + ", ".join(str(d) for d in shape) + "]"


def random_feeds(session: Any, seed: int = 0, skip: set[str] | None = None
                 ) -> dict[str, np.ndarray]:
    """A random array per input (except those in ``skip``); symbolic dims are 1."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for v in session.graph.inputs:
        if v.name in (skip or ()):
            continue
        info = v.info
        if info is None or info.shape is None:
            raise InvalidInputError(f"input {v.name!r} has no declared shape; pass --input")
        shape = tuple(d if isinstance(d, int) else 1 for d in info.shape)
        dt = info.dtype.numpy
        if dt == np.bool_:
            feeds[v.name] = rng.integers(0, 2, shape).astype(bool)
        elif np.issubdtype(dt, np.integer):
            feeds[v.name] = rng.integers(0, 4, shape).astype(dt)
        else:
            feeds[v.name] = rng.standard_normal(shape).astype(dt)
    return feeds


def _load_inputs(specs: Sequence[str] | None, session: Any) -> dict[str, np.ndarray]:
    """``--input NAME=FILE.npy`` feeds, checked against the model's inputs."""
    names = [v.name for v in session.graph.inputs]
    feeds = {}
    for spec in specs or []:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise InvalidInputError(f"--input expects NAME=FILE.npy, got {spec!r}")
        if name not in names:
            raise InvalidInputError(
                f"--input {name}: the model has no input {name!r} (inputs: {', '.join(names)})")
        try:
            feeds[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError) as exc:
            raise InvalidInputError(f"--input {name}: cannot read {path!r} as a .npy array: "
                                    f"{exc}") from None  # fmt: skip
    return feeds


def model_path(ref: str) -> str:
    """A model argument (path, URL or built-in name, see ``spawnml models``) as a file path."""
    from .model_catalog import resolve_model

    return str(resolve_model(ref))


def backend_args(text: str | None) -> list[str]:
    """A ``--backends a,b`` argument, each name registered and available here; None: all
    available ones."""
    from .registry import backend_names, get_backend

    if not text:
        return get_available_backends()
    names = backend_names(text)
    for name in names:
        get_backend(name)  # raises with the registered names / the reason it cannot run
    return names


def _session(model: str, backends: list[str] | None) -> Any:
    from .session import InferenceSession

    return InferenceSession(model, backends=backends)


def _ort_session(model: str) -> Any:
    try:
        import onnxruntime as ort
    except ImportError:
        raise SpawnMLError(
            "--compare/--against onnxruntime needs `pip install onnxruntime`"
        ) from None
    return ort.InferenceSession(model, providers=["CPUExecutionProvider"])


def _peer(model: str, name: str) -> Callable[[dict], list]:
    if name == "onnxruntime":
        ort = _ort_session(model)
        return lambda feed: ort.run(None, feed)
    sess = _session(model, [name])
    return lambda feed: sess.run(None, feed)


def _time(fn: Callable[[], Any], n: int) -> list[float]:
    return _time_interleaved({"": fn}, n, block=max(1, n))[""]


_SETTLE_S = 0.3


def _time_interleaved(
    runs: dict[str, Callable[[], Any]], n: int, block: int = 10
) -> dict[str, list[float]]:
    """``n`` timings of each callable, taken in alternating blocks of ``block`` runs so that
    drift in the machine's load hits every contender alike. Each block starts after a pause
    that lets the previous contender's thread pool fall asleep (onnxruntime's and OpenBLAS's
    workers busy-wait for a while after a run and would steal the cores) and with one
    untimed call (plan/compile work, cold caches)."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    while any(len(t) < n for t in times.values()):
        for name, fn in runs.items():
            if len(runs) > 1:
                time.sleep(_SETTLE_S)
            fn()
            for _ in range(min(block, n - len(times[name]))):
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
    return times


# -------------------------------------------------------------------------------- info


def cmd_info(args: argparse.Namespace, table: Table) -> int:
    from .graph.importer import import_model
    from .graph.plan import lookup_op

    backends = backend_args(args.backends)
    args.model = model_path(args.model)
    graph = import_model(args.model)
    print(f"model: {args.model}")
    print("opsets: " + ", ".join(f"{d or 'ai.onnx'}={v}" for d, v in sorted(graph.opsets.items())))
    rows = [[v.name, v.info.dtype.onnx_type_name if v.info else "?",
             _shape_str(v.info.shape if v.info else None)] for v in graph.inputs]  # fmt: skip
    print("\ninputs:\n" + table(rows, ["name", "type", "shape"]))
    rows = [[v.name, v.info.dtype.onnx_type_name if v.info else "?",
             _shape_str(v.info.shape if v.info else None)] for v in graph.outputs]  # fmt: skip
    print("\noutputs:\n" + table(rows, ["name", "type", "shape"]))
    hist = Counter((n.domain, n.op_type) for n in graph.walk())
    support: dict[str, dict[tuple[str, str], str]] = {}
    memory: dict[str, Any] = {}
    for b in backends:
        try:
            sess = _session(args.model, [b])
            placement = sess.placement()
            memory[b] = sess.memory()
            found: dict[tuple[str, str], str] = {}
            for step in sess._runner.last_plan.spec.steps:  # type: ignore[union-attr]
                key = (step.node.domain, step.node.op_type)
                kind = placement.kinds.get(step.node.name, step.kind)
                found[key] = kind if found.get(key, kind) == kind else "mixed"
            support[b] = found
        except SpawnMLError as exc:
            support[b] = {}
            print(f"\n{b}: cannot load the model: {exc}", file=sys.stderr)
    rows = []
    for (domain, op), count in sorted(hist.items(), key=lambda kv: (-kv[1], kv[0])):
        try:
            lookup_op_ok = lookup_op(next(n for n in graph.walk() if n.op_type == op)) is not None
        except SpawnMLError:
            lookup_op_ok = False
        gone = "fused" if lookup_op_ok else "missing"  # removed by the passes, or no OpDef
        cells = [support[b].get((domain, op), gone) if support[b] else "-" for b in backends]
        rows.append([f"{domain + '::' if domain else ''}{op}", str(count), *cells])
    print("\nops (kernel: backend-specific, portable: kernel language, host: numpy on the host,")
    print("folded: constant, computed once; fused: removed by the passes; per backend):")
    print(table(rows, ["op", "count", *backends]))
    for b, m in memory.items():
        ratio = m.planned_peak_bytes / max(m.intermediate_bytes, 1)
        print(f"\nmemory on {b}: planned peak {_mib(m.planned_peak_bytes)} for intermediates "
              f"totalling {_mib(m.intermediate_bytes)} ({ratio:.0%})")  # fmt: skip
    return 0


# -------------------------------------------------------------------------------- run


def _errors(got: Sequence[np.ndarray], want: Sequence[np.ndarray], names: Sequence[str]) -> list:
    rows = []
    for name, g, w in zip(names, got, want):
        g64, w64 = np.asarray(g, np.float64), np.asarray(w, np.float64)
        if g64.shape != w64.shape:
            rows.append([name, f"shape {g64.shape} != {w64.shape}", "-"])
            continue
        diff = np.abs(g64 - w64)
        abs_err = float(diff.max()) if diff.size else 0.0
        rel = float((diff / np.maximum(np.abs(w64), 1e-12)).max()) if diff.size else 0.0
        rows.append([name, f"{abs_err:.3g}", f"{rel:.3g}"])
    return rows


def cmd_run(args: argparse.Namespace, table: Table) -> int:
    backends = backend_args(args.backend)
    _peer_name(args.compare)
    for flag in ("benchmark", "profile", "profile_rows"):
        if getattr(args, flag) < 0:
            raise InvalidInputError(f"--{flag.replace('_', '-')} must be >= 0")
    if (args.plot or args.json) and not args.profile:
        raise InvalidInputError("--plot and --json describe a profile: add --profile")
    if args.plot:
        from .plot import require_matplotlib

        require_matplotlib()  # before the run, not after it
    args.model = model_path(args.model)
    sess = _session(args.model, backends)
    given = _load_inputs(args.input, sess)
    feeds = {**random_feeds(sess, skip=set(given)), **given}
    outputs = sess.run(None, feeds)
    names = [o.name for o in sess.get_outputs()]
    rows = [[n, str(o.dtype), str(tuple(o.shape)),
             f"{float(np.mean(o)):.5g}" if o.size and o.dtype.kind in "fiub" else "-"]
            for n, o in zip(names, outputs)]  # fmt: skip
    print(table(rows, ["output", "dtype", "shape", "mean"]))
    counts = sess.placement().counts
    print("placement: " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    if args.compare:
        want = _peer(args.model, args.compare)(feeds)
        print(f"\ncompared with {args.compare}:")
        print(table(_errors(outputs, want, names), ["output", "max abs err", "max rel err"]))
    if args.profile:
        prof = sess.profile(feeds, runs=args.profile)
        print(f"\nprofile ({args.profile} runs after the first; kernels by total time):")
        print(prof.table(limit=args.profile_rows, sort="time"))
        if args.json:
            with open(args.json, "w") as f:
                f.write(prof.json())
            print(f"profile written to {args.json}")
        if args.plot:
            from .plot import plot_profile

            path = plot_profile(prof, args.plot, limit=args.profile_rows)
            print(f"profile plot written to {path}")
    if args.benchmark:
        times = sorted(_time(lambda: sess.run(None, feeds), args.benchmark))
        p90 = times[min(len(times) - 1, math.ceil(0.9 * len(times)) - 1)]
        mem = sess.memory()
        print(f"\nbenchmark ({args.benchmark} runs): median {np.median(times) * 1e3:.2f} ms, "
              f"p90 {p90 * 1e3:.2f} ms, planned peak memory {_mib(mem.planned_peak_bytes)} "
              f"(intermediates total {_mib(mem.intermediate_bytes)})")  # fmt: skip
    return 0


# -------------------------------------------------------------------------------- bench


def _progress(done: int, total: int, label: str, enabled: bool) -> None:
    if not enabled:
        return
    width = 30
    fill = width * done // max(total, 1)
    sys.stderr.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {done}/{total} {label[:40]:40s}")
    sys.stderr.flush()
    if done == total:
        sys.stderr.write("\n")


def _peer_name(text: str | None) -> str | None:
    if text and text != "onnxruntime":
        backend_args(text)  # a backend as the peer: registered and available
    return text


def cmd_bench(args: argparse.Namespace, table: Table) -> int:
    backends = backend_args(args.backends)
    peer = _peer_name(args.against)
    if args.runs < 1:
        raise InvalidInputError(f"--runs must be at least 1, got {args.runs}")
    if args.plot:
        from .plot import require_matplotlib

        require_matplotlib()  # before the bench, not after it
    models = [(ref, model_path(ref)) for ref in args.models]
    show = args.progress if args.progress is not None else sys.stderr.isatty()
    total = len(models) * (len(backends) + (1 if peer else 0))
    done = 0
    results: list[dict[str, Any]] = []
    for label, model in models:
        entry: dict[str, Any] = {"model": label, "median_ms": {}, "errors": {}}
        feeds = None
        runs: dict[str, Callable[[], Any]] = {}
        for name in ([peer] if peer else []) + backends:
            _progress(done, total, f"{label} on {name}", show)
            try:
                if name == "onnxruntime":
                    sess = _ort_session(model)
                    if feeds is None:
                        feeds = random_feeds(_session(model, backends[:1]))
                else:
                    sess = _session(model, [name])
                    feeds = feeds if feeds is not None else random_feeds(sess)
                run = lambda s=sess, f=feeds: s.run(None, f)  # noqa: E731
                run()  # fail here, not while timing
                runs[name] = run
            except Exception as exc:  # noqa: BLE001 - one failure must not stop the bench
                entry["errors"][name] = f"{type(exc).__name__}: {exc}"[:200]
            done += 1
        for name, times in _time_interleaved(runs, args.runs).items():
            entry["median_ms"][name] = float(np.median(times) * 1e3)
        results.append(entry)
    _progress(total, total, "done", show)
    header = ["model", *backends] + ([peer] if peer else [])
    rows = []
    for e in results:
        ms = e["median_ms"]
        cells = [f"{ms[b]:.2f} ms" if b in ms else "error" for b in header[1:]]
        if peer and peer in ms:
            cells[: len(backends)] = [
                f"{ms[b]:.2f} ms (x{ms[b] / ms[peer]:.2f})" if b in ms else "error"
                for b in backends
            ]
        rows.append([e["model"], *cells])
    print(table(rows, header))
    summary: dict[str, float] = {}
    if peer:
        for b in backends:
            ratios = [e["median_ms"][b] / e["median_ms"][peer] for e in results
                      if b in e["median_ms"] and peer in e["median_ms"]]  # fmt: skip
            if ratios:
                summary[b] = float(math.exp(np.mean(np.log(ratios))))
                print(f"geometric mean time ratio {b}/{peer}: {summary[b]:.2f}")
    failed = [(e["model"], name, err) for e in results for name, err in e["errors"].items()]
    for model, name, err in failed:
        print(f"{model} on {name}: {err}", file=sys.stderr)
    data = {"results": results, "geomean_ratio": summary, "against": peer}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(data, f, indent=2)
    if args.plot:
        from .plot import plot_bench

        print(f"plot written to {plot_bench(data, args.plot)}")
    if failed:
        raise SpawnMLError(f"{len(failed)} of {total} model/contender pairs failed (listed "
                           "above); their cells say 'error'")  # fmt: skip
    return 0


# -------------------------------------------------------------------------------- models


def cmd_models(args: argparse.Namespace, table: Table) -> int:
    from .model_catalog import catalog

    entries = list(catalog().values())
    if args.fetch:
        known = {m.name: m for m in entries}
        for name in args.fetch:
            if name not in known:
                raise InvalidInputError(f"no built-in model {name!r} (built-in: "
                                        f"{', '.join(known)})")  # fmt: skip
            print(f"{name}: {known[name].locate()}")
        return 0
    if args.json:
        print(json.dumps([m.as_dict() for m in entries], indent=2))
        return 0
    rows = [[m.name, m.task or "-", m.size, "yes" if m.cached() else "no", m.source, m.license]
            for m in entries]  # fmt: skip
    print(table(rows, ["model", "task", "size", "cached", "source", "license"]))
    print("\nAny command that takes a model file also takes these names; a model that is not "
          "cached is built or fetched on first use (`spawnml models --fetch NAME` does it now).")
    return 0


_MODEL_HELP = ("ONNX model: a path, an http(s)/file URL (fetched into the cache) or a "
               "built-in name such as squeezenet1_1 (see `spawnml models`)")
_BACKENDS_HELP = ("comma-separated backend names, in preference order (default: every "
                  "available one; see `spawnml backends`)")


def add_commands(sub: Any, table: Table) -> None:
    """Register info/run/bench on the CLI's subparsers."""
    p = sub.add_parser(
        "info", help="inputs, outputs, opsets, ops and their support per backend",
        description="Describe a model: its inputs and outputs, opsets, every op type with its "
        "count and how it runs on each backend (kernel, portable, host, folded, fused), and "
        "the planned peak memory per backend.")  # fmt: skip
    p.add_argument("model", help=_MODEL_HELP)
    p.add_argument("--backends", help=_BACKENDS_HELP)
    p.set_defaults(func=lambda a: cmd_info(a, table))
    p = sub.add_parser(
        "run", help="run a model once (random feeds unless --input is given)",
        description="Run a model once and print each output's dtype, shape and mean, and "
        "where the nodes ran. Inputs not given with --input are random (symbolic dims 1).")
    p.add_argument("model", help=_MODEL_HELP)
    p.add_argument("--backend", help=_BACKENDS_HELP)
    p.add_argument("--input", action="append", metavar="NAME=FILE.npy",
                   help="feed input NAME from a .npy file (repeat for several inputs)")
    p.add_argument("--compare", metavar="onnxruntime|BACKEND",
                   help="run the same feeds there too and print the max abs/rel error")
    p.add_argument("--benchmark", type=int, metavar="N", default=0,
                   help="time N more runs: median, p90 and planned peak memory")
    p.add_argument("--profile", type=int, nargs="?", const=10, default=0, metavar="N",
                   help="profile N runs (default 10) per kernel: nodes, backend, time, bytes, "
                   "launches per run, host vs device time")  # fmt: skip
    p.add_argument("--profile-rows", type=int, default=40, metavar="N",
                   help="kernels shown in the profile table (slowest first; JSON has all)")
    p.add_argument("--json", metavar="FILE", help="write the profile as JSON (with --profile)")
    p.add_argument("--plot", metavar="FILE.png",
                   help="draw the per-kernel time breakdown (with --profile; needs "
                   "spawnml-core[plot])")  # fmt: skip
    p.set_defaults(func=lambda a: cmd_run(a, table))
    p = sub.add_parser(
        "bench", help="time models on several backends side by side",
        description="Time each model on each backend (and a peer) in the same run, in "
        "alternating blocks so that load drift hits every contender alike; prints median "
        "times, ratios to the peer and their geometric mean. Exits 1 if any contender "
        "failed.")  # fmt: skip
    p.add_argument("models", nargs="+", metavar="MODEL", help=_MODEL_HELP)
    p.add_argument("--backends", help=_BACKENDS_HELP)
    p.add_argument("--against", metavar="onnxruntime|BACKEND",
                   help="the peer every backend's time is divided by")
    p.add_argument("--runs", type=int, default=10, help="timed runs per contender (default 10)")
    p.add_argument("--json", metavar="FILE", help="write medians, errors and ratios as JSON")
    p.add_argument("--plot", metavar="FILE.png",
                   help="draw per-model, per-backend ratio bars (needs spawnml-core[plot])")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: only when stderr is a terminal)")
    p.set_defaults(func=lambda a: cmd_bench(a, table))
    p = sub.add_parser(
        "models", help="the built-in model names, their source, size, license and cache state",
        description="List the model names every model argument accepts: generated "
        "architectures (seeded weights, built locally) and real models fetched from package "
        "registries (pip/npm), plus those plugins add.")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--fetch", nargs="+", metavar="NAME",
                   help="build or fetch these models into the cache now and print their paths")
    p.set_defaults(func=lambda a: cmd_models(a, table))
