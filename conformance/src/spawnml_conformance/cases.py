"""Conformance cases per op, generated from what the OpDef declares.

Seeds come from three places: the op's own ``cases()``, shape cases generated from a
declared elementwise domain (``elementwise_inputs``), and the inputs of the official ONNX
node tests for the op. Each float32 seed is then re-run in every dtype the op declares
(``dtypes``) and with edge values injected (NaN/±Inf/±0, subnormals, huge magnitudes)
unless the op opts out (``edge_values = False``); inputs the op converts to integers
(``edge_unspecified_inputs``) get only subnormals, NaN/±Inf and out-of-range conversions
being unspecified.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spawnml.dtypes import DType, dtype as as_dtype
from spawnml.errors import SpawnMLError
from spawnml.op import Node, OpDef, TensorInfo

from .tolerances import tolerance_for
from .values import EDGES, convert, inject, random_array

# (shape per input) for generated elementwise cases: scalars, size-0/1 dims, broadcasting.
UNARY_SHAPES: list[tuple[tuple[int, ...], ...]] = [
    ((2, 3, 4),), ((),), ((0,),), ((1,),), ((1, 5, 1),), ((3, 0, 2),), ((17,),),
]
BROADCAST_SHAPES: list[tuple[tuple[int, ...], tuple[int, ...]]] = [
    ((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (3, 2)), ((5,), ()),
    ((), ()), ((0, 3), (3,)), ((1,), (1,)), ((2, 1, 3), (1, 4, 1)), ((4, 0), (1, 1)),
]


@dataclass
class ConformanceCase:
    """One node, its inputs and inferred outputs; compared with ``op.reference``."""

    op: OpDef
    name: str
    node: Node
    inputs: list[np.ndarray | None]
    outputs: list[TensorInfo] = field(default_factory=list)
    rtol: float = 0.0
    atol: float = 0.0
    origin: str = "op"  # "op": op.cases(); "domain": generated shapes; "onnx": ONNX node test
    variant: str = ""  # "", a dtype name, "edge:<family>" or "<dtype>,edge:<family>"
    infer_error: str = ""  # set for a declared case whose infer raised (reported as a failure)
    seed: str = ""  # the name of the seed a variant derives from
    raises: type[Exception] | None = None  # invalid inputs: this error is the expected result

    @property
    def label(self) -> str:
        return f"{self.op.op_type} {self.name}"

    @property
    def group(self) -> str:
        """The stratum used when sampling: where the case came from and what varies."""
        kind = "edge" if "edge:" in self.variant else ("dtype" if self.variant else "seed")
        return f"{self.origin}:{kind}"


def default_opset(op: OpDef) -> int:
    """The opset a case runs at when it names none: the newest the op supports."""
    if op.until_version is not None:
        return op.until_version - 1
    if op.domain in ("", "ai.onnx"):
        import onnx.defs

        return max(op.since_version, onnx.defs.onnx_opset_version())
    return op.since_version


def make_case(
    op: OpDef,
    name: str,
    inputs: Sequence[np.ndarray | None],
    attrs: dict[str, Any] | None = None,
    *,
    opset: int | None = None,
    n_outputs: int = 1,
    rtol: float = 0.0,
    atol: float = 0.0,
    origin: str = "op",
    variant: str = "",
    strict: bool = False,
) -> ConformanceCase | None:
    """A case with its outputs inferred; None when ``infer`` rejects it (unless ``strict``:
    a declared case is kept and its infer error is reported as a failure)."""
    arrays = [None if a is None else np.asarray(a) for a in inputs]
    node = Node(
        op.op_type,
        [f"x{i}" if a is not None else "" for i, a in enumerate(arrays)],
        [f"y{i}" for i in range(n_outputs)],
        dict(attrs or {}),
        name=name,
        domain=op.domain,
        opset=opset or default_opset(op),
    )
    case = ConformanceCase(op, name, node, arrays, [], rtol, atol, origin, variant, seed=name)
    values = [a if i in op.value_inputs else None for i, a in enumerate(arrays)]
    try:
        infos = [None if a is None else TensorInfo(as_dtype(a.dtype), tuple(a.shape))
                 for a in arrays]  # raises for dtypes spawnml has no type for (strings)
        case.outputs = list(op.infer(node, infos, values))
    except (SpawnMLError, NotImplementedError, ValueError, TypeError) as exc:
        if not strict:
            return None
        case.infer_error = f"infer raised {type(exc).__name__}: {exc}"
    return case


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


def _main_dtype(op: OpDef) -> np.dtype:
    declared = [d for d in op.dtypes if d is not DType.bfloat16]
    if not declared or DType.float32 in declared:
        return np.dtype(np.float32)
    return declared[0].numpy


def declared_cases(op: OpDef) -> list[ConformanceCase]:
    out = []
    for c in op.cases():
        case = make_case(op, c.name, c.inputs, c.attrs, opset=c.opset, n_outputs=c.n_outputs,
                         rtol=c.rtol, atol=c.atol, origin="op", strict=True)
        assert case is not None
        case.raises = c.raises
        out.append(case)
    return out


def domain_cases(op: OpDef) -> list[ConformanceCase]:
    """Shape cases for an op that declares ``elementwise_inputs``."""
    n = op.elementwise_inputs
    if n <= 0:
        return []
    shapes: Iterable[tuple[tuple[int, ...], ...]]
    if n == 1:
        shapes = UNARY_SHAPES
    else:
        shapes = [tuple(pair[i % 2] for i in range(n)) for pair in BROADCAST_SHAPES]
    dt = _main_dtype(op)
    out = []
    for k, shape_set in enumerate(shapes):
        name = "shapes_" + "_".join("x".join(map(str, s)) or "scalar" for s in shape_set)
        rng = _rng(f"{op.op_type}/{k}")
        arrays = [random_array(rng, s, dt) for s in shape_set]
        case = make_case(op, name, arrays, origin="domain")
        if case is not None:
            out.append(case)
    return out


def onnx_seed_cases(op: OpDef) -> list[ConformanceCase]:
    """The first data set of each official single-node ONNX test of this op."""
    from spawnml.onnx_attributes import node_from_proto
    from spawnml.testing.onnx_node_tests import node_cases

    domain = "" if op.domain == "ai.onnx" else op.domain
    out = []
    for test in node_cases():
        graph = test.model.graph
        if len(graph.node) != 1 or not test.data_sets:
            continue
        proto = graph.node[0]
        proto_domain = "" if proto.domain in ("", "ai.onnx") else proto.domain
        if proto.op_type != op.op_type or proto_domain != domain:
            continue
        opsets = {o.domain: o.version for o in test.model.opset_import}
        node = node_from_proto(proto, opsets.get(proto.domain, opsets.get("", 0)))
        if not op.supports_opset(node.opset):
            continue
        if not all(v.type.HasField("tensor_type") for v in [*graph.input, *graph.output]):
            continue  # sequences, optionals, maps: op cases hold tensors only
        feed = dict(zip([i.name for i in graph.input], test.data_sets[0][0]))
        inputs = [feed.get(n) if n else None for n in node.inputs]
        case = make_case(op, f"onnx:{test.name}", inputs, node.attrs, opset=node.opset,
                         n_outputs=len(node.outputs), origin="onnx")
        if case is not None:
            out.append(case)
    return out


def _main_inputs(op: OpDef, case: ConformanceCase) -> tuple[np.dtype | None, list[int]]:
    """The dtype of the case's main (type-parameter) inputs and their positions."""
    candidates = [(i, a) for i, a in enumerate(case.inputs)
                  if a is not None and i not in op.value_inputs]
    if not candidates:
        return None, []
    main = candidates[0][1].dtype
    return main, [i for i, a in candidates if a.dtype == main]


def _variant(
    case: ConformanceCase, tag: str, inputs: list[np.ndarray | None]
) -> ConformanceCase | None:
    variant = f"{case.variant},{tag}" if case.variant else tag
    found = make_case(case.op, f"{case.seed}[{variant}]", inputs, case.node.attrs,
                      opset=case.node.opset, n_outputs=len(case.node.outputs), rtol=case.rtol,
                      atol=case.atol, origin=case.origin, variant=variant)
    if found is not None:
        found.seed = case.seed
    return found


def dtype_variants(op: OpDef, case: ConformanceCase) -> list[ConformanceCase]:
    """The case again in every other dtype the op declares (seeds in the main dtype only)."""
    main, positions = _main_inputs(op, case)
    if main is None or main != _main_dtype(op):
        return []
    out = []
    for dt in op.dtypes:
        if dt is DType.bfloat16 or dt.numpy == main:
            continue
        inputs = list(case.inputs)
        for i in positions:
            inputs[i] = convert(inputs[i], dt.numpy)  # type: ignore[arg-type]
        found = _variant(case, dt.value, inputs)
        if found is not None:
            out.append(found)
    return out


def edge_variants(op: OpDef, case: ConformanceCase) -> list[ConformanceCase]:
    """The case with each family of edge values injected into its float main inputs."""
    main, positions = _main_inputs(op, case)
    if not op.edge_values or main is None or main.name not in EDGES:
        return []
    if not any(case.inputs[i].size for i in positions):  # type: ignore[union-attr]
        return []
    out = []
    unspecified = set(op.edge_unspecified(case.node, case.outputs))
    for family, values in EDGES[main.name].items():
        if family == "huge" and op.elementwise_inputs <= 0:
            continue  # reductions of such values overflow in float32 by nature
        # NaN/±Inf/out-of-range values converted to integers are unspecified: not tested
        into = [i for i in positions if family == "subnormal" or i not in unspecified]
        if family == "large" and op.elementwise_inputs <= 0:
            # One large operand per term: the tolerance below is rtol × the large values, and
            # a sum of large × large products cancels far beyond it in float32 (MatMul, the
            # weighted losses' denominators), whatever the kernel.
            into = into[:1]
        if not any(case.inputs[i].size for i in into):  # type: ignore[union-attr]
            continue
        inputs = list(case.inputs)
        for shift, i in enumerate(into):
            inputs[i] = inject(inputs[i], values, shift)  # type: ignore[arg-type]
        found = _variant(case, f"edge:{family}", inputs)
        if found is None:
            continue
        if family == "large":
            # Float arithmetic on such inputs is exact only to rtol × their magnitude
            # (cancellation in sums): scale the absolute tolerance accordingly.
            found.atol = max(found.atol, tolerance_for(main).rtol * max(map(abs, values)))
        out.append(found)
    return out


def generate(op: OpDef, *, onnx_seeds: bool = True) -> list[ConformanceCase]:
    """Every case for ``op``: seeds, their dtype variants, and edge variants of the seeds
    and of their float16 variants (edge variants of ONNX seeds only where the op has no
    seeds of its own, to keep the count proportional); then every seed again at the first
    opset of each other epoch of the op (``opset_cases``: where its semantics differ)."""
    from .opset_cases import opset_cases

    own = declared_cases(op) + domain_cases(op)
    onnx = onnx_seed_cases(op) if onnx_seeds else []
    out: list[ConformanceCase] = []
    for seed in own + onnx:
        out.append(seed)
        if seed.infer_error or seed.raises:  # no variants of an invalid-input case
            continue
        variants = dtype_variants(op, seed)
        out.extend(variants)
        if seed.origin != "onnx" or not own:
            out.extend(edge_variants(op, seed))
            for v in variants:
                if v.variant == "float16":
                    out.extend(edge_variants(op, v))
    out.extend(opset_cases(op, own + onnx))
    seen: set[str] = set()
    unique = []
    for c in out:
        if c.name not in seen:
            seen.add(c.name)
            unique.append(c)
    return unique


def sample(cases: Sequence[ConformanceCase], limit: int | None) -> list[ConformanceCase]:
    """At most ``limit`` cases, taken round-robin over the groups (origin × variant kind),
    deterministic, so a short run still covers every kind of case."""
    if limit is None or len(cases) <= limit:
        return list(cases)
    groups: dict[str, list[ConformanceCase]] = {}
    for c in cases:
        groups.setdefault(c.group, []).append(c)
    picked: list[ConformanceCase] = []
    queues = [list(g) for g in groups.values()]
    while len(picked) < limit and any(queues):
        for q in queues:
            if q and len(picked) < limit:
                picked.append(q.pop(0))
    order = {id(c): k for k, c in enumerate(cases)}
    return sorted(picked, key=lambda c: order[id(c)])

