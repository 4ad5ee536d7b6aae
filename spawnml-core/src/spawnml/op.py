"""The operator contract: what an operator definition (OpDef) provides.

An OpDef says which ONNX op and opsets it implements, how to check attributes and infer
output shapes and dtypes (``infer``), what the right answer is (``reference``, numpy: the
truth the conformance suite compares against), and how to compute it on a device
(``lower``: a short list of kernel launches written in the kernel language).

Shapes are concrete at lowering time: the session specialises its plan per distinct set of
input shapes. Inputs whose *values* are known when planning (initializers, folded
constants) are passed as ``values`` so ops such as Reshape or Slice turn them into
compile-time constants.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .dtypes import DType
from .errors import InvalidModelError, UnsupportedOpError
from .kernel.frontend import Kernel

if TYPE_CHECKING:
    from .graph.ir import Graph

Dim = int | str | None  # a concrete size, a symbolic name, or unknown


@dataclass(frozen=True)
class TensorInfo:
    """The static description of a value: dtype and (possibly symbolic) shape."""

    dtype: DType
    shape: tuple[Dim, ...] | None  # None: unknown rank

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    @property
    def size(self) -> int:
        assert self.is_static, self
        n = 1
        for d in self.shape or ():
            n *= int(d)  # type: ignore[arg-type]
        return n


@dataclass
class Node:
    """One operator application in a graph."""

    op_type: str
    inputs: list[str]  # "" marks an omitted optional input
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    name: str = ""
    domain: str = ""
    opset: int = 0  # the model's opset for this node's domain
    subgraphs: dict[str, Any] = field(default_factory=dict)  # attribute name -> Graph

    def describe(self) -> str:
        return f"{self.op_type} node {self.name!r}" if self.name else f"{self.op_type} node"


# -- references used by lowerings ------------------------------------------------------


@dataclass(frozen=True)
class In:
    """The node's input number ``index``."""

    index: int


@dataclass(frozen=True)
class Out:
    """The node's output number ``index``."""

    index: int


@dataclass(frozen=True)
class Tmp:
    """Temporary number ``index`` of the lowering (see ``Lowering.temps``)."""

    index: int


@dataclass(frozen=True)
class Data:
    """A constant array made by the lowering (uploaded once, e.g. a lookup table)."""

    array: np.ndarray

    def __hash__(self) -> int:
        return id(self.array)


Ref = In | Out | Tmp | Data


@dataclass
class Launch:
    """One kernel launch: ``kernel(inputs..., out=output, **consts)``.

    ``shapes``: the shape the kernel sees for each buffer, inputs then the output, where it
    differs from the tensor's (None: the tensor's own). A buffer is flat, so a kernel may
    view it in any shape of the same size: a 1x1 convolution reads (N, C, H, W) as
    (N, C, H*W) and becomes a matrix product."""

    kernel: Kernel
    inputs: list[Ref]
    output: Out | Tmp
    consts: dict[str, Any] = field(default_factory=dict)
    shapes: tuple[tuple[int, ...] | None, ...] = ()

    def viewed(self, infos: Sequence[TensorInfo]) -> list[TensorInfo]:
        """``infos`` (inputs then the output) as this launch's kernel sees them."""
        out = list(infos)
        for i, shape in enumerate(self.shapes):
            if shape is not None:
                size = math.prod(shape)
                if not infos[i].is_static or infos[i].size != size:
                    raise InvalidModelError(f"kernel {self.kernel.name}: a view of shape "
                                            f"{shape} over a tensor of shape {infos[i].shape}")
                out[i] = TensorInfo(infos[i].dtype, tuple(shape))
        return out


@dataclass
class Check:
    """A precondition on the node's input values that only the device can see (indices
    within range): ``kernel`` writes ``size`` int32 counts of violations; a non-zero total
    fails the run with InvalidInputError(``message`` formatted with ``count``)."""

    kernel: Kernel
    inputs: list[Ref]
    size: int
    message: str
    consts: dict[str, Any] = field(default_factory=dict)


@dataclass
class Lowering:
    """How a node runs on a device: launches over its inputs, outputs and temporaries.

    ``aliases`` maps an output index to an input index whose buffer it shares (a reshape
    of a contiguous tensor is a view, never a copy). ``checks`` run before the launches;
    the runtime reads their counts back with the run's outputs."""

    launches: list[Launch] = field(default_factory=list)
    temps: list[TensorInfo] = field(default_factory=list)
    aliases: dict[int, int] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)

    def temp(self, dtype: DType, shape: Sequence[int]) -> Tmp:
        self.temps.append(TensorInfo(dtype, tuple(int(d) for d in shape)))
        return Tmp(len(self.temps) - 1)

    def launch(
        self, kernel: Kernel, inputs: Sequence[Ref], output: Out | Tmp, **consts: Any
    ) -> None:
        self.launches.append(Launch(kernel, list(inputs), output, consts))

    def launch_viewed(
        self, kernel: Kernel, inputs: Sequence[Ref], output: Out | Tmp,
        shapes: Sequence[Sequence[int] | None], **consts: Any,
    ) -> None:
        """A launch whose kernel sees its buffers in ``shapes`` (inputs then the output;
        None keeps a tensor's shape; see ``Launch.shapes``)."""
        views = tuple(None if s is None else tuple(int(d) for d in s) for s in shapes)
        self.launches.append(Launch(kernel, list(inputs), output, consts, views))

    def check(
        self, kernel: Kernel, inputs: Sequence[Ref], size: int, message: str, **consts: Any
    ) -> None:
        """Count violations of a precondition on the device (see ``Check``)."""
        self.checks.append(Check(kernel, list(inputs), size, message, consts))


class HostOnly(UnsupportedOpError):
    """Raised by ``lower`` when this node must compute on the host (data-dependent output
    shapes, or inputs whose values are needed but unknown when planning)."""


class OpDef:
    """Base class of operator definitions. Subclasses set the class attributes and
    implement ``infer``, ``reference`` and (unless ``host_only``) ``lower``."""

    domain: ClassVar[str] = ""
    op_type: ClassVar[str]
    since_version: ClassVar[int] = 1
    until_version: ClassVar[int | None] = None  # exclusive
    host_only: ClassVar[bool] = False
    """Computed on the host by ``reference`` (declared, and shown in placement reports)."""
    value_inputs: ClassVar[tuple[int, ...]] = ()
    """Inputs whose values (not just shapes) are needed to infer or lower (e.g. Reshape's shape)."""
    # Declarative domain, read by the conformance suite to generate cases (all optional).
    dtypes: ClassVar[Sequence[DType]] = ()
    """Element types of the op's main inputs; each case is re-run in every one (empty: only
    the dtypes the cases themselves use)."""
    elementwise_inputs: ClassVar[int] = 0
    """N > 0: elementwise over N numpy-broadcasting inputs, so the suite generates the shape
    cases itself (scalars, size-0 and size-1 dims, broadcasting)."""
    edge_values: ClassVar[bool] = True
    """Whether the suite injects NaN, ±Inf, subnormals, -0 and huge values into float inputs
    (False where the op leaves them unspecified)."""
    edge_unspecified_inputs: ClassVar[tuple[int, ...]] = ()
    """Float inputs where NaN, ±Inf and out-of-range values give unspecified results: inputs
    the op converts to integers (float indices, docs/kernels.md), or whose non-finite values
    reach outputs depending on the algorithm (DFT: FFT vs direct sum). The suite injects only
    subnormals into them (the other inputs still get every edge value)."""

    def edge_unspecified(self, node: Node, outputs: Sequence[TensorInfo]) -> tuple[int, ...]:
        """``edge_unspecified_inputs`` of this node: ops whose conversion depends on the node
        (Cast to an integer type) override it."""
        return self.edge_unspecified_inputs
    random: ClassVar[bool] = False
    """Outputs are random draws (RandomNormal, Bernoulli...): the suite compares only their
    shapes and dtypes with the reference."""

    def supports_opset(self, version: int) -> bool:
        return self.since_version <= version and (
            self.until_version is None or version < self.until_version
        )

    def infer(
        self, node: Node, inputs: Sequence[TensorInfo | None], values: Sequence[np.ndarray | None]
    ) -> list[TensorInfo]:
        """Output dtypes and shapes; raise InvalidModelError for invalid attributes/shapes."""
        raise NotImplementedError

    def reference(self, node: Node, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        """The numpy truth for this node."""
        raise NotImplementedError

    def cases(self) -> list[OpCase]:
        """Conformance cases beyond the official ONNX ones: broadcasting, size-0/1 dims,
        negative axes, NaN/±Inf, every attribute variant (see spawnml-conformance)."""
        return []

    def lower(
        self,
        node: Node,
        inputs: Sequence[TensorInfo | None],
        outputs: Sequence[TensorInfo],
        values: Sequence[np.ndarray | None],
    ) -> Lowering:
        """The kernel launches computing the node for these concrete shapes."""
        raise HostOnly(f"{node.describe()}: {self.op_type} has no device kernel")

    def function_body(self, node: Node, inputs: Sequence[TensorInfo | None]) -> Graph | None:
        """A function body computing this node from other operators, or None (the default:
        the node runs itself). The session inlines the body in place of the node before
        planning (``spawnml.graph.expand``): its inputs take the node's inputs and its outputs
        become the node's outputs, positionally. ``inputs`` are the types the model declares
        for the node's inputs (None where unknown). Used where a node carries graph
        attributes that the primitive operators can express, as FlexAttention's score_mod."""
        return None

    # -- helpers for subclasses -----------------------------------------------------------
    def attr(self, node: Node, name: str, default: Any = None, *, required: bool = False) -> Any:
        if name in node.attrs:
            return node.attrs[name]
        if required:
            raise InvalidModelError(f"{node.describe()}: missing required attribute {name!r}")
        return default

    def fail(self, node: Node, message: str) -> InvalidModelError:
        return InvalidModelError(f"{node.describe()}: {message}")

    def __repr__(self) -> str:
        until = "" if self.until_version is None else f"..{self.until_version - 1}"
        domain = self.domain or "ai.onnx"
        return f"<OpDef {domain}::{self.op_type} opset {self.since_version}{until}>"


@dataclass
class OpCase:
    """A conformance case an op declares: inputs, attributes and what the case probes.

    ``raises``: the inputs are invalid (out-of-range indices): the reference and every
    backend must raise this SpawnMLError rather than compute anything."""

    name: str
    inputs: list[np.ndarray | None]
    attrs: dict[str, Any] = field(default_factory=dict)
    opset: int | None = None
    rtol: float = 1e-5
    atol: float = 1e-6
    n_outputs: int = 1
    raises: type[Exception] | None = None


ANY = None
"""In ``BackendKernel.attributes``: any value of that attribute is implemented."""


class BackendKernel:
    """A backend-specific implementation of an op (e.g. BLAS convolution on cpu), tried
    before the portable lowering; registered with ``spawnml_register_kernels``.

    A kernel declares the domain it implements; placement uses it only inside that domain
    and runs the op's portable lowering outside it, and the conformance suite holds it to
    the op's reference on every opset epoch the domain covers
    (:mod:`spawnml.opset_history`):

    * ``since_version`` / ``until_version`` (exclusive): the opsets implemented. Left
      ``None``, the range is the op's *latest epoch* only (the versions since its
      attributes, inputs or defaults last changed): a kernel written against today's spec
      is never applied to an older meaning it may not know (Softmax < 13 coerces to 2-D).
      An open ``until_version`` covers future opsets, which the conformance suite checks.
    * ``dtypes``: the element types of the outputs and of the inputs in ``dtype_inputs``
      (None: every present input); ``None``: any.
    * ``attributes``: attribute name -> the values implemented (a collection) or ``ANY``;
      a node with an attribute not named here is outside the domain. ``None``: any
      attribute (a kernel that declares nothing keeps checking in ``supports``).

    ``supports`` then checks what a declaration cannot state (shapes, value combinations).
    """

    backend: ClassVar[str]
    domain: ClassVar[str] = ""
    op_type: ClassVar[str]
    since_version: ClassVar[int | None] = None
    until_version: ClassVar[int | None] = None
    dtypes: ClassVar[frozenset[DType] | None] = None
    dtype_inputs: ClassVar[tuple[int, ...] | None] = None
    attributes: ClassVar[Mapping[str, Collection[Any] | None] | None] = None

    @classmethod
    def opset_range(cls) -> tuple[int, int | None]:
        """The declared opsets, or the op's latest epoch when none are declared."""
        if cls.since_version is not None:
            return cls.since_version, cls.until_version
        from .opset_history import latest_epoch

        return latest_epoch(cls.domain, cls.op_type) or (1, cls.until_version)

    def outside_domain(
        self, node: Node, inputs: Sequence[TensorInfo | None], outputs: Sequence[TensorInfo]
    ) -> str | None:
        """Why the node is outside the declared domain (None: inside it)."""
        if any(info is not None and info.dtype.is_string for info in [*inputs, *outputs]):
            return "string tensors are computed on the host"
        since, until = self.opset_range()
        if node.opset and (node.opset < since or (until is not None and node.opset >= until)):
            last = "" if until is None else f"..{until - 1}"
            return f"opset {node.opset} outside the kernel's opsets {since}{last}"
        if self.dtypes is not None:
            checked = [
                info for i, info in enumerate(inputs)
                if info is not None and (self.dtype_inputs is None or i in self.dtype_inputs)
            ]  # fmt: skip
            for info in [*checked, *outputs]:
                if info is not None and info.dtype not in self.dtypes:
                    return f"dtype {info.dtype} outside the kernel's dtypes"
        if self.attributes is not None:
            for name, value in node.attrs.items():
                if name.startswith("_"):
                    continue  # set by spawnml's graph passes (e.g. a fused activation)
                if name not in self.attributes:
                    return f"attribute {name!r} outside the kernel's attributes"
                allowed = self.attributes[name]
                if allowed is not None and _attr_value(value) not in allowed:
                    return f"attribute {name}={value!r} outside the kernel's values"
        return None

    def supports(
        self, node: Node, inputs: Sequence[TensorInfo | None], outputs: Sequence[TensorInfo]
    ) -> bool:
        """Whether this kernel handles the node with these dtypes/shapes/attributes
        (called only inside the declared domain)."""
        return True

    def prepare(
        self,
        backend: Any,
        node: Node,
        inputs: Sequence[TensorInfo | None],
        outputs: Sequence[TensorInfo],
        values: Sequence[np.ndarray | None],
    ) -> Any:
        """A callable ``run(inputs: list[DeviceTensor | None], outputs: list[DeviceTensor])``."""
        raise NotImplementedError


def kernel_attributes(*names: str, **values: Collection[Any]) -> Mapping[str, Any]:
    """A read-only ``BackendKernel.attributes``: ``names`` with any value, ``values`` with
    the values listed (``kernel_attributes("axis", mode=("constant", "edge"))``)."""
    found: dict[str, Collection[Any] | None] = dict.fromkeys(names)
    found.update({k: tuple(v) for k, v in values.items()})
    return MappingProxyType(found)


def _attr_value(value: Any) -> Any:
    """An attribute value in a hashable, comparable form (bytes -> str, lists -> tuples)."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, (list, tuple, np.ndarray)):
        return tuple(_attr_value(v) for v in value)
    return value
