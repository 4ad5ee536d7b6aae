"""Specialise a graph for one set of input shapes: infer every value, fold constants on the
host, and place each remaining node on a backend.

Constant folding runs on the host with each op's numpy reference: any node whose inputs are
all known (initializers, earlier folds) and ``Shape``/``Size`` of a tensor whose shape is known
become constants, so shape arithmetic never runs on a device.

Every inferred tensor is checked against the per-tensor byte limit
(``memory.tensor_byte_limit``) before anything computes it: a tensor larger than the memory
there is raises OutOfMemoryError naming the node, the value, its shape and bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..backend import Backend
from ..dtypes import dtype as as_dtype
from ..errors import InvalidModelError, KernelError, OutOfMemoryError, SpawnMLError
from ..execute import PreparedLowering
from ..memory import check_tensor_bytes
from ..op import HostOnly, In, Node, OpDef, TensorInfo
from ..registry import backend_kernels, find_op
from .choose import mode as choice_mode, portable_preferred
from .fusion import FUSED_ATTR, apply_fused_activation
from .ir import Graph, node_reads
from .subgraph_types import control_outputs

HOST = "host"
CONTROL_FLOW = {"If", "Loop", "Scan", "SequenceMap"}
# Ops whose result differs per run: never folded.
NONDETERMINISTIC = {
    "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
    "Bernoulli",
}  # fmt: skip
SHAPE_ONLY = {"Shape", "Size"}  # results depend on the input's shape, never its values
FOLD_LIMIT = 1 << 26  # bytes; larger folded constants stay computed at run time


def infer_node(op: OpDef, node: Node, inputs: Sequence[TensorInfo | None],
               values: Sequence[np.ndarray | None]) -> list[TensorInfo]:
    """``op.infer``, with any error that is not spawnml's (a plugin op's TypeError, KeyError...)
    turned into an InvalidModelError naming the node, so the user learns which node failed."""
    try:
        return list(op.infer(node, inputs, values))
    except SpawnMLError:
        raise
    except Exception as exc:
        domain = f"{node.domain}::" if node.domain not in ("", "ai.onnx") else ""
        raise InvalidModelError(
            f"{node.describe()}: {domain}{node.op_type}.infer raised {type(exc).__name__}: {exc}"
        ) from exc


def check_tensor_sizes(node: Node, outputs: Sequence[TensorInfo | None], limit: int | None) -> None:
    """OutOfMemoryError when an output of ``node`` with a known shape needs more than
    ``limit`` bytes (as numpy stores it on the host)."""
    if limit is None:
        return
    for name, info in zip(node.outputs, outputs):
        if info is not None and info.is_static:
            nbytes = info.size * np.dtype(info.dtype.numpy).itemsize
            what = f"{node.describe()}: output {name!r} ({info.dtype}, shape {info.shape})"
            check_tensor_bytes(nbytes, limit, what)


def _static_bytes(infos: Sequence[TensorInfo | None]) -> int:
    return sum(i.size * np.dtype(i.dtype.numpy).itemsize for i in infos
               if i is not None and i.is_static)  # fmt: skip


@dataclass
class NodePlan:
    """How one node runs for this shape set."""

    node: Node
    op: OpDef
    inputs: list[TensorInfo | None]
    outputs: list[TensorInfo]
    values: list[np.ndarray | None]
    location: str  # a backend name, "host", or "folded"
    kind: str
    """"kernel" (backend-specific), "portable", "host" (declared host-only), "control"
    (If/Loop), "folded" (constant), "reference" (no backend could: numpy on the host),
    "dynamic" (shapes known only at run time), "fused" (computed by a later fused step)."""
    run: Any = None  # PreparedLowering or a BackendKernel's run(inputs, outputs)
    aliases: dict[int, int] = field(default_factory=dict)
    used_inputs: set[int] = field(default_factory=set)  # inputs a device step reads
    reason: str = ""  # why the first backend does not run it
    fused: list[Node] = field(default_factory=list)  # the nodes a fused step computes


@dataclass
class Specialised:
    """Every value's info and constant, and every node's plan, for one input-shape set."""

    infos: dict[str, TensorInfo | None]
    consts: dict[str, np.ndarray]
    steps: list[NodePlan]


def _known(info: TensorInfo | None) -> bool:
    return info is not None and info.is_static


def lookup_op(node: Node) -> OpDef:
    return find_op(node.domain, node.op_type, node.opset)


def host_reference(plan_op: OpDef, node: Node, arrays: Sequence[np.ndarray | None]) -> list:
    """Run a node on the host with its numpy reference (applying a fused activation). An
    error that is not spawnml's (numpy refusing inconsistent shapes the op's checks let
    through) becomes an InvalidModelError naming the node."""
    try:
        with np.errstate(all="ignore"):
            outs = list(plan_op.reference(node, list(arrays)))
    except (SpawnMLError, MemoryError):
        raise
    except Exception as exc:
        shapes = [None if a is None else list(np.shape(a)) for a in arrays]
        raise InvalidModelError(
            f"{node.describe()}: cannot compute on inputs of shapes {shapes}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if FUSED_ATTR in node.attrs:
        outs[0] = apply_fused_activation(node, outs[0])
    return outs


def _fold(op: OpDef, node: Node, infos: list[TensorInfo | None], consts: list) -> list | None:
    if node.op_type in NONDETERMINISTIC or node.subgraphs:
        return None
    if node.op_type in SHAPE_ONLY and node.domain == "" and _known(infos[0]):
        dummy = np.broadcast_to(np.zeros((), infos[0].dtype.numpy), infos[0].shape)  # type: ignore[union-attr, arg-type]
        return host_reference(op, node, [dummy])
    if all(c is not None or not name for c, name in zip(consts, node.inputs)):
        if sum(c.nbytes for c in consts if c is not None) > FOLD_LIMIT:
            return None
        outs = host_reference(op, node, consts)
        if not all(isinstance(o, np.ndarray | np.generic) for o in outs):
            return None  # a sequence or an empty optional is made when the graph runs
        if sum(np.asarray(o).nbytes for o in outs) > FOLD_LIMIT:
            return None
        return [np.asarray(o) for o in outs]
    return None


def _used_inputs(lowering: Any) -> set[int]:
    used = {r.index for launch in lowering.launches for r in launch.inputs if isinstance(r, In)}
    return used | set(lowering.aliases.values())


def _check_fits(backend: Backend, info: TensorInfo) -> None:
    """The backend stores the dtype and one buffer can hold the tensor (else: next backend)."""
    storage = backend.storage_dtype(info.dtype)
    limit = backend.capabilities.max_buffer_bytes
    if info.is_static and info.size * storage.itemsize > limit:
        raise OutOfMemoryError(
            f"{backend.name}: a {info.dtype} tensor of shape {info.shape} needs "
            f"{info.size * storage.itemsize} bytes; one buffer holds at most {limit}"
        )


def place_node(
    step: NodePlan, backends: Sequence[Backend], on_reason: Callable[[str, str], None] | None = None
) -> None:
    """Choose the first backend with a kernel for the node (backend-specific kernel first,
    else the portable lowering); HostOnly ops and nodes no backend runs go to the host."""
    node, op = step.node, step.op
    reasons: list[str] = []
    choice_mode()  # a bad SPAWNML_KERNEL_CHOICE is an error, never a host fallback
    if node.subgraphs or (node.op_type in CONTROL_FLOW and node.domain == ""):
        step.location, step.kind = HOST, "control"
        return
    if op.host_only:
        step.location, step.kind, step.reason = HOST, "host", f"{node.op_type} is host-only"
        return
    for backend in backends:
        try:
            for kernel in backend_kernels(backend.name, node.domain, node.op_type):
                fused = FUSED_ATTR in node.attrs
                if fused and not getattr(kernel, "handles_fused_activation", False):
                    break  # this backend kernel sees plain nodes only
                # Outside its declared domain (opsets, dtypes, attributes) a kernel is never
                # asked: the portable lowering below is the op's meaning there.
                if kernel.outside_domain(node, step.inputs, step.outputs) is not None:
                    continue
                if kernel.supports(node, step.inputs, step.outputs):
                    if portable_preferred(backend, kernel, op, node, step.inputs, step.outputs,
                                          step.values):
                        reasons.append(f"{backend.name}: the portable kernels measured faster "
                                       f"than {type(kernel).__name__} on these shapes")
                        break
                    step.run = kernel.prepare(backend, node, step.inputs, step.outputs, step.values)
                    step.location, step.kind = backend.name, "kernel"
                    step.reason = "; ".join(reasons)
                    step.used_inputs = {i for i, n in enumerate(node.inputs) if n}
                    return
            # lower first: an op that declares HostOnly (e.g. for an element type no
            # backend stores) is placed on the host as declared, not as a fallback.
            lowering = op.lower(node, step.inputs, step.outputs, step.values)
            for info in [*step.inputs, *step.outputs, *lowering.temps]:
                if info is not None:
                    _check_fits(backend, info)
            step.run = PreparedLowering(backend, lowering, step.inputs, step.outputs)
            step.location, step.kind = backend.name, "portable"
            step.reason = "; ".join(reasons)
            step.aliases = dict(lowering.aliases)
            step.used_inputs = _used_inputs(lowering)
            return
        except HostOnly as exc:
            step.location, step.kind, step.reason = HOST, "host", str(exc)
            return
        except InvalidModelError:
            raise
        except (SpawnMLError, KernelError) as exc:
            reasons.append(f"{backend.name}: {type(exc).__name__}: {exc}")
    # No backend has a kernel: the host computes the numpy reference (reported, not silent).
    step.location, step.kind = HOST, "reference"
    step.reason = "; ".join(reasons) or "no backend"


def specialise(
    graph: Graph,
    feeds: dict[str, TensorInfo],
    backends: Sequence[Backend],
    outer_consts: dict[str, np.ndarray] | None = None,
    max_tensor_bytes: int | None = None,
    *,
    place: bool = True,
    unknown: set[str] | None = None,
) -> Specialised:
    """Infer, fold and place every node of ``graph`` for concrete feed infos; a tensor
    over ``max_tensor_bytes`` (None: no limit) raises OutOfMemoryError.

    A value whose type is not known before the run (named in ``unknown``, an output of
    an If whose branches disagree, a node whose inference needs the shapes its
    inputs have only at run time) makes the nodes that read it "dynamic": they are
    specialised when they run. ``place=False`` infers and folds only (no kernels are
    prepared), as control-flow bodies are when the enclosing plan is made."""
    infos: dict[str, TensorInfo | None] = dict(feeds)
    infos.update(dict.fromkeys(unknown or (), None))
    consts: dict[str, np.ndarray] = dict(outer_consts or {})
    for name, array in graph.initializers.items():
        consts[name] = array
        infos[name] = TensorInfo(as_dtype(array.dtype), tuple(array.shape))
    for name, array in consts.items():
        infos.setdefault(name, TensorInfo(as_dtype(array.dtype), tuple(array.shape)))
    steps: list[NodePlan] = []
    for node in graph.nodes:
        op = lookup_op(node)
        ins = [infos.get(n) if n else None for n in node.inputs]
        vals = [consts.get(n) if n else None for n in node.inputs]
        if node.subgraphs and node.op_type in CONTROL_FLOW and node.domain == "":
            outs = control_outputs(node, ins, vals, infos, consts)
            _record(infos, node, outs)
            steps.append(NodePlan(node, op, ins, outs, vals, HOST, "control"))  # type: ignore[arg-type]
            continue
        if any(n and n in infos and infos[n] is None for n in node.inputs):
            _record(infos, node, [None] * len(node.outputs))  # known when it runs
            steps.append(NodePlan(node, op, ins, [None] * len(node.outputs), vals, HOST,  # type: ignore[list-item]
                                  "dynamic"))  # fmt: skip
            continue
        inferred = _infer_first(op, node, ins, vals, max_tensor_bytes)
        refused = inferred if isinstance(inferred, SpawnMLError) else None
        inferred = None if refused is not None else inferred
        folded = None
        if inferred is None or _static_bytes(inferred) <= FOLD_LIMIT:
            try:
                folded = _fold(op, node, ins, vals)
            except SpawnMLError:
                if refused is not None:  # the reason inference gave is the better one
                    raise refused from None
                raise
        if folded is not None:
            if len(folded) < len([o for o in node.outputs if o]):
                raise InvalidModelError(f"{node.describe()}: produced {len(folded)} outputs")
            outs = []
            for name, array in zip(node.outputs, folded):
                if name:
                    consts[name] = array
                    infos[name] = TensorInfo(as_dtype(array.dtype), tuple(array.shape))
                outs.append(infos.get(name))
            steps.append(NodePlan(node, op, ins, outs, vals, "folded", "folded"))
            continue
        if refused is not None and all(_known(i) for i, n in zip(ins, node.inputs) if n):
            raise refused
        # Inference that needs the run-time shapes of its inputs waits for them.
        out_infos = inferred if inferred is not None else [None] * len(node.outputs)
        _record(infos, node, out_infos)
        step = NodePlan(node, op, ins, list(out_infos), vals, HOST, "dynamic")
        if node.subgraphs:
            step.kind = "control"  # bodies are specialised when they run
        elif place and all(_known(i) for i, n in zip(ins, node.inputs) if n) and all(
            _known(o) for o in out_infos
        ):
            place_node(step, backends)
        steps.append(step)
    _check_declared_outputs(graph, infos)
    _drop_unused(graph, steps)
    return Specialised(infos, consts, steps)


def _record(infos: dict[str, TensorInfo | None], node: Node,
            outs: Sequence[TensorInfo | None]) -> None:
    for name, info in zip(node.outputs, outs):
        if name:
            infos[name] = info


def _check_declared_outputs(graph: Graph, infos: dict[str, TensorInfo | None]) -> None:
    """A graph output declared with one element type but computed as another is a model
    error (onnxruntime refuses it), never a result of a type the caller did not expect."""
    for v in graph.outputs:
        found = infos.get(v.name)
        if isinstance(v.info, TensorInfo) and isinstance(found, TensorInfo) \
                and found.dtype != v.info.dtype:
            raise InvalidModelError(
                f"graph output {v.name!r} is declared {v.info.dtype} but computed as "
                f"{found.dtype}"
            )


def _infer_first(op: OpDef, node: Node, ins: list[TensorInfo | None],
                 vals: list[np.ndarray | None],
                 limit: int | None) -> list[TensorInfo] | SpawnMLError:
    """The node's output infos, checked against the tensor limit before anything computes
    them (folding included); the error where inference fails (a node that folds may still
    succeed: its reference decides, as before)."""
    try:
        outs = infer_node(op, node, ins, vals)
    except SpawnMLError as exc:
        return exc
    check_tensor_sizes(node, outs, limit)
    return outs


def _drop_unused(graph: Graph, steps: list[NodePlan]) -> None:
    """Nodes whose results only fed folded nodes are not run ("unused")."""
    needed = {v.name for v in graph.outputs}
    for step in reversed(steps):
        if step.kind == "folded":
            continue
        if any(o in needed for o in step.node.outputs if o):
            needed.update(node_reads(step.node))
        else:
            step.kind, step.location = "unused", "unused"
            if hasattr(step.run, "close"):
                step.run.close()
            step.run = None
