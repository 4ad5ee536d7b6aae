"""ONNX ModelProto -> :class:`Graph`, with every way a model can be broken turned into an
InvalidModelError that says what is wrong.

External data is read only from inside the model's folder: absolute locations and paths
escaping it (``..``, symlinks) are refused.
"""

from __future__ import annotations

import functools
import os
from math import prod
from pathlib import Path
from typing import Any

import numpy as np

from ..dtypes import dtype as as_dtype
from ..errors import InvalidInputError, InvalidModelError, SpawnMLError, UnsupportedOpError
from ..memory import check_tensor_bytes, tensor_byte_limit
from ..onnx_attributes import node_from_proto
from ..op import TensorInfo
from ..values import OptionalInfo, SequenceInfo, ValueInfo
from .ir import Graph, Value, topological_order
from .validate import check_node

_MAX_MODEL_BYTES = 2**31 - 1  # protobuf's own limit


def load_model_proto(model: str | os.PathLike | bytes | Any) -> tuple[Any, Path | None]:
    """Parse a model from a path, bytes or a ModelProto; returns it with its folder."""
    import onnx
    from google.protobuf.message import DecodeError

    if hasattr(model, "graph") and hasattr(model, "opset_import"):
        return model, None
    base: Path | None = None
    if isinstance(model, (bytes, bytearray, memoryview)):
        data = bytes(model)
    elif isinstance(model, (str, os.PathLike)):
        path = Path(model)
        if not path.is_file():
            path = _resolve_reference(model)
        data = path.read_bytes()
        base = path.resolve().parent
    else:
        raise InvalidModelError(f"expected a model path, bytes or ModelProto, got {type(model)}")
    if not data:
        raise InvalidModelError("the model is empty (0 bytes)")
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise InvalidModelError(
            f"the model bytes are not a valid ONNX protobuf (truncated or malformed): {exc}"
        ) from None
    if not proto.HasField("graph"):
        raise InvalidModelError("the model has no graph (not an ONNX model, or truncated)")
    if not proto.opset_import:
        raise InvalidModelError("the model declares no opset_import")
    _check_utf8(proto, "model")
    return proto, base


def _check_utf8(message: Any, path: str) -> None:
    """Every string field of ``message`` (names, op types, domains, attribute strings...)
    is valid UTF-8, as ONNX requires: protobuf hands invalid ones over as ``bytes``, which
    nothing downstream expects. Bytes fields (raw tensor data) are never read."""
    for name, is_string, repeated in _text_fields(message.DESCRIPTOR):
        if repeated:
            values = getattr(message, name)
        elif message.HasField(name):
            values = [getattr(message, name)]
        else:
            continue
        for k, item in enumerate(values):
            if is_string:
                if isinstance(item, bytes):
                    raise InvalidModelError(f"{path}.{name} is not valid UTF-8: {item[:40]!r}")
            else:
                label = getattr(item, "name", "")
                label = label if isinstance(label, str) and label else k
                _check_utf8(item, f"{path}.{name}[{label}]" if repeated else f"{path}.{name}")


@functools.cache
def _text_fields(descriptor: Any) -> tuple[tuple[str, bool, bool], ...]:
    """(name, is a string, is repeated) of the string and message fields of a message type."""
    from google.protobuf.descriptor import FieldDescriptor

    wanted = (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_MESSAGE)
    return tuple((f.name, f.type == FieldDescriptor.TYPE_STRING, f.is_repeated)
                 for f in descriptor.fields if f.type in wanted)


def _resolve_reference(model: str | os.PathLike) -> Path:
    """A model name or URL (``spawnml.model_catalog``) as a local file."""
    from ..model_catalog import resolve_model

    try:
        return resolve_model(model)
    except InvalidInputError as exc:
        raise InvalidModelError(str(exc)) from None


# ------------------------------------------------------------------------- external data


def _external_bytes(tensor: Any, base: Path | None, expected: int | None) -> bytes:
    """The bytes of an external tensor: at most ``expected`` (its size from dims and element
    type), so a missing or wrong ``length`` never reads a whole unrelated file."""
    info = {e.key: e.value for e in tensor.external_data}
    location = info.get("location", "")
    what = f"initializer {tensor.name!r}"
    try:
        return _read_external(info, location, what, base, expected)
    except (OSError, ValueError, UnicodeError) as exc:  # NUL bytes, undecodable names, I/O
        raise InvalidModelError(
            f"{what}: external data location {location!r} cannot be read: {exc}"
        ) from None


def _read_external(info: dict[str, str], location: str, what: str, base: Path | None,
                   expected: int | None) -> bytes:
    if base is None:
        raise InvalidModelError(
            f"{what} stores its data in external file {location!r}, but the model was given "
            "as bytes; load it from its path so the file can be found"
        )
    if not location:
        raise InvalidModelError(f"{what} is external but names no location")
    if os.path.isabs(location) or location.startswith(("/", "\\")) or ":" in location[:3]:
        raise InvalidModelError(
            f"{what}: external data location {location!r} is an absolute path; only files "
            "inside the model's folder are read"
        )
    parts = Path(location.replace("\\", "/")).parts
    if ".." in parts:
        raise InvalidModelError(
            f"{what}: external data location {location!r} escapes the model's folder ('..')"
        )
    path = (base / location).resolve()
    if base != path and base not in path.parents:
        raise InvalidModelError(
            f"{what}: external data location {location!r} resolves outside the model's "
            f"folder ({path})"
        )
    if not path.is_file():
        raise InvalidModelError(f"{what}: external data file {location!r} does not exist")
    try:
        offset = int(info.get("offset", 0))
        length = int(info["length"]) if "length" in info else None
    except ValueError:
        raise InvalidModelError(f"{what}: bad external data offset/length {info}") from None
    size = path.stat().st_size
    if length is None:
        length = expected if expected is not None else size - offset
    elif expected is not None and length != expected:
        raise InvalidModelError(
            f"{what}: external data length {length} does not match its shape and element "
            f"type ({expected} bytes)"
        )
    if offset < 0 or length < 0 or offset + length > size:
        raise InvalidModelError(
            f"{what}: external data range offset={offset} length={length} is outside "
            f"{location!r} ({size} bytes)"
        )
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(length)


def tensor_to_array(tensor: Any, base: Path | None) -> np.ndarray:
    """A TensorProto as a numpy array (external data resolved safely)."""
    from onnx import TensorProto, numpy_helper

    what = f"initializer {tensor.name!r}"
    dims = tuple(int(d) for d in tensor.dims)
    if any(d < 0 for d in dims):
        raise InvalidModelError(f"{what} has negative dims {dims}")
    try:
        dt = as_dtype(int(tensor.data_type))  # narrow types decode to ml_dtypes arrays
    except InvalidInputError:
        raise UnsupportedOpError(
            f"{what} has element type {_type_name(tensor.data_type)}, which spawnml does not "
            "support"
        ) from None
    count = int(np.prod(dims, dtype=np.float64)) if dims else 1
    nbytes = -(-count * dt.bits // 8)
    if dt.is_string and (tensor.data_location == TensorProto.EXTERNAL
                         or tensor.HasField("raw_data")):
        raise InvalidModelError(f"{what}: a STRING tensor must hold its values in string_data")
    if tensor.data_location == TensorProto.EXTERNAL:
        t = TensorProto()
        t.CopyFrom(tensor)
        del t.external_data[:]
        t.data_location = TensorProto.DEFAULT
        t.raw_data = _external_bytes(tensor, base, nbytes)
        tensor = t
    elif tensor.HasField("raw_data") and len(tensor.raw_data) != nbytes:
        raise InvalidModelError(
            f"{what} holds {len(tensor.raw_data)} bytes of raw data for shape {dims} "
            f"({dt}: {nbytes} bytes)"
        )
    try:
        array = numpy_helper.to_array(tensor)
    except Exception as exc:  # noqa: BLE001 - onnx raises many kinds for bad tensors
        raise InvalidModelError(f"{what} cannot be decoded: {exc}") from None
    expected = int(np.prod(tuple(tensor.dims), dtype=np.int64))
    if array.size != expected:
        raise InvalidModelError(f"{what} holds {array.size} values for shape {tuple(tensor.dims)}")
    return array


# ----------------------------------------------------------------------------- types


def _type_name(code: int) -> str:
    from onnx import TensorProto

    try:
        return TensorProto.DataType.Name(int(code))
    except ValueError:
        return f"code {code}"


def type_to_info(type_proto: Any, what: str) -> ValueInfo | None:
    """A ValueInfo's TypeProto as TensorInfo (dims: int, symbolic name, or None), or as
    SequenceInfo / OptionalInfo for sequences and optionals."""
    which = type_proto.WhichOneof("value")
    if which == "sequence_type":
        elem = type_to_info(type_proto.sequence_type.elem_type, f"{what} (element)")
        return SequenceInfo(elem if isinstance(elem, TensorInfo) else None)
    if which == "optional_type":
        elem = type_to_info(type_proto.optional_type.elem_type, f"{what} (element)")
        return OptionalInfo(elem if not isinstance(elem, OptionalInfo) else None)
    if which == "map_type":  # ZipMap's outputs: seq(map(K, V)) values, made on the host
        return None
    if not type_proto.HasField("tensor_type"):
        if which is None:
            return None
        raise UnsupportedOpError(f"{what} has type {which!r}, which spawnml does not support")
    tt = type_proto.tensor_type
    try:
        dt = as_dtype(int(tt.elem_type)) if tt.elem_type else None
    except InvalidInputError:
        raise UnsupportedOpError(
            f"{what} has element type {_type_name(tt.elem_type)}, which spawnml does not support"
        ) from None
    if dt is None:
        return None
    if not tt.HasField("shape"):
        return TensorInfo(dt, None)
    dims: list[int | str | None] = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            # Exporters write -1 for "unknown" (onnxruntime accepts it): treat it as such.
            dims.append(int(d.dim_value) if d.dim_value >= 0 else None)
        elif d.HasField("dim_param") and d.dim_param and d.dim_param != "?":
            dims.append(d.dim_param)  # "?" (some exporters) means unknown, not one shared size
        else:
            dims.append(None)
    return TensorInfo(dt, tuple(dims))


# ----------------------------------------------------------------------------- graphs


def _check_names(names: list[str], what: str, unique: bool = True) -> None:
    """Every name non-empty and (``unique``) declared once. A graph output may be listed
    twice, as onnxruntime allows: the run returns its value at both positions."""
    seen: set[str] = set()
    for name in names:
        if not name:
            raise InvalidModelError(f"{what} has an empty name")
        if unique and name in seen:
            raise InvalidModelError(f"{what} {name!r} is declared more than once")
        seen.add(name)


def _densify(
    name: str, dims: tuple[int, ...], values: np.ndarray, indices: np.ndarray, where: str
) -> np.ndarray:
    """A sparse initializer as a dense array; its indices are checked before the array is
    allocated (ONNX: linear indices of shape [NNZ], or coordinates of shape [NNZ, rank])."""
    what = f"{where}: sparse initializer {name!r}"
    linear = indices.ndim == 1
    bounds = np.array([prod(dims)] if linear else dims, dtype=object)
    shape_ok = len(indices) == values.size and (
        linear or (indices.ndim == 2 and indices.shape[1] == len(dims)))
    if not shape_ok:
        raise InvalidModelError(
            f"{what} has {values.size} values and indices of shape {list(indices.shape)}; "
            f"expected indices of shape [{values.size}] or [{values.size}, {len(dims)}]"
        )
    if indices.size and ((indices < 0).any() or (indices >= bounds).any()):
        raise InvalidModelError(f"{what} has an index outside its dims {list(dims)}")
    check_tensor_bytes(prod(dims) * values.dtype.itemsize, tensor_byte_limit(),
                       f"{what} of dims {list(dims)}")
    dense = np.zeros(dims, dtype=values.dtype)
    if linear:
        dense.reshape(-1)[indices] = values.reshape(-1)
    else:
        dense[tuple(indices.T)] = values.reshape(-1)
    return dense


def _convert_graph(
    gp: Any, opsets: dict[str, int], base: Path | None, outer: set[str], where: str
) -> Graph:
    from onnx import AttributeProto

    initializers: dict[str, np.ndarray] = {}
    for t in gp.initializer:
        if not t.name:
            raise InvalidModelError(f"{where}: an initializer has no name")
        initializers[t.name] = tensor_to_array(t, base)
    for st in gp.sparse_initializer:
        values = tensor_to_array(st.values, base)
        indices = tensor_to_array(st.indices, base).astype(np.int64)
        dims = tuple(int(d) for d in st.dims)
        if any(d < 0 for d in dims):
            raise InvalidModelError(
                f"{where}: sparse initializer {st.values.name!r} has negative dims {dims}"
            )
        initializers[st.values.name] = _densify(st.values.name, dims, values, indices, where)
    init_names = set(initializers)
    _check_names([v.name for v in gp.input], f"{where}: graph input")
    _check_names([v.name for v in gp.output], f"{where}: graph output", unique=False)
    inputs = [
        Value(v.name, type_to_info(v.type, f"{where} input {v.name!r}"))
        for v in gp.input
        if v.name not in init_names  # old models list initializers as inputs too
    ]
    # An input with an initializer is an overridable default; treat it as a constant.
    outputs = [Value(v.name, type_to_info(v.type, f"{where} output {v.name!r}")) for v in gp.output]
    value_info: dict[str, TensorInfo] = {}
    for v in gp.value_info:
        try:
            info = type_to_info(v.type, f"value {v.name!r}")
        except InvalidModelError:
            continue  # value_info is advisory
        if info is not None:
            value_info[v.name] = info
    nodes = []
    scope = outer | init_names | {v.name for v in inputs}
    for i, proto in enumerate(gp.node):
        domain = "" if proto.domain == "ai.onnx" else proto.domain
        if domain not in opsets:
            raise InvalidModelError(
                f"{where}: node {proto.name or i!r} ({proto.op_type}) uses domain {domain!r}, "
                f"which the model does not import (opset_import: {sorted(opsets)})"
            )
        if not proto.op_type:
            raise InvalidModelError(f"{where}: node {i} has no op_type")
        check_node(proto, opsets[domain], domain, f"{where}: {proto.name or i!r}")
        try:
            node = node_from_proto(proto, opsets[domain])
        except SpawnMLError:
            raise
        except Exception as exc:  # noqa: BLE001 - malformed attributes
            raise InvalidModelError(
                f"{where}: node {proto.name or i!r}: bad attribute: {exc}"
            ) from None
        node.domain = domain
        if not node.name:
            node.name = f"{proto.op_type}_{i}"
        inner_scope = scope | {o for n in gp.node for o in n.output}
        for attr in proto.attribute:
            if attr.type == AttributeProto.GRAPH:
                node.subgraphs[attr.name] = _convert_graph(
                    attr.g, opsets, base, inner_scope, f"{node.describe()} {attr.name}"
                )
                node.attrs.pop(attr.name, None)
            elif attr.type == AttributeProto.GRAPHS:
                raise InvalidModelError(
                    f"{node.describe()}: graph-list attributes are not supported"
                )
        nodes.append(node)
    seen: set[str] = set()
    for n in nodes:
        for o in n.outputs:
            if o and (o in seen or o in init_names or o in {v.name for v in inputs}):
                raise InvalidModelError(f"{where}: value {o!r} is defined more than once")
            seen.add(o)
    available = outer | init_names | {v.name for v in inputs}
    ordered = topological_order(nodes, available, where)
    defined = available | seen
    for v in outputs:
        if v.name not in defined:
            raise InvalidModelError(f"{where}: output {v.name!r} is not computed by any node")
    return Graph(ordered, inputs, outputs, initializers, value_info, dict(opsets), gp.name)


def _opsets(proto: Any) -> dict[str, int]:
    """The imported opsets by domain, refused where onnxruntime refuses them: an IR or ONNX
    opset version newer than the installed onnx knows (no schemas to check nodes against),
    a version below 1, or a domain imported twice."""
    import onnx

    if proto.ir_version > onnx.IR_VERSION:
        raise InvalidModelError(
            f"the model's IR version {proto.ir_version} is newer than the newest the installed "
            f"onnx {onnx.__version__} reads ({onnx.IR_VERSION})"
        )
    newest = onnx.defs.onnx_opset_version()
    opsets: dict[str, int] = {}
    seen: set[tuple[str, int]] = set()
    for o in proto.opset_import:
        domain = "" if o.domain == "ai.onnx" else o.domain
        if (o.domain, o.version) in seen:
            continue  # an exact repeat (skl2onnx writes one), harmless as in onnxruntime
        seen.add((o.domain, o.version))
        if domain in opsets:
            raise InvalidModelError(f"opset_import names domain {o.domain!r} more than once")
        if o.version < 1 or (domain == "" and o.version > newest):
            raise InvalidModelError(
                f"opset_import gives domain {o.domain!r} version {o.version}; the ONNX opsets "
                f"the installed onnx {onnx.__version__} knows are 1 to {newest}"
            )
        opsets[domain] = int(o.version)
    return opsets


def import_model(model: str | os.PathLike | bytes | Any) -> Graph:
    """Import an ONNX model (path, bytes or ModelProto) as a validated :class:`Graph`."""
    proto, base = load_model_proto(model)
    opsets = _opsets(proto)
    if "" not in opsets:
        opsets[""] = 1  # ONNX default when only other domains are imported
    graph = _convert_graph(proto.graph, opsets, base, set(), f"graph {proto.graph.name!r}")
    if not graph.outputs:
        raise InvalidModelError("the model's graph has no outputs")
    _add_inferred_types(proto, graph)
    return graph


def _add_inferred_types(proto: Any, graph: Graph) -> None:
    """Merge onnx's shape inference (symbolic dims) into value_info; advisory only."""
    import onnx

    if proto.ByteSize() > (1 << 30):
        return
    try:
        inferred = onnx.shape_inference.infer_shapes(_without_negative_dims(proto),
                                                     strict_mode=False)
    except Exception:  # noqa: BLE001 - our own per-op inference is authoritative
        return
    _merge_inferred(inferred.graph, graph)


def _merge_inferred(gp: Any, graph: Graph) -> None:
    """Copy the types onnx inferred for ``gp`` into ``graph``, and into its subgraphs (an
    If branch's outputs may be declared without a type: onnx infers it from the outer
    scope, which the If's own inference cannot see)."""
    from onnx import AttributeProto

    for v in list(gp.value_info) + list(gp.output):
        try:
            info = type_to_info(v.type, v.name)
        except InvalidModelError:
            continue
        if info is not None and v.name not in graph.value_info:
            graph.value_info[v.name] = info
    by_outputs = {tuple(n.outputs): n for n in graph.nodes}
    for pnode in gp.node:
        node = by_outputs.get(tuple(pnode.output))
        if node is None:
            continue
        for attr in pnode.attribute:
            sub = node.subgraphs.get(attr.name)
            if attr.type == AttributeProto.GRAPH and sub is not None:
                _merge_inferred(attr.g, sub)


def _without_negative_dims(proto: Any) -> Any:
    """``proto``, or a copy whose negative ``dim_value`` s (exporters' "unknown") are cleared:
    onnx's C++ inference aborts the process on some of them (a Slice of a -1 axis)."""
    def values(graph: Any) -> Any:
        for v in (*graph.input, *graph.output, *graph.value_info):
            if v.type.HasField("tensor_type"):
                yield from v.type.tensor_type.shape.dim
        for node in graph.node:
            for attr in node.attribute:
                for g in (*([attr.g] if attr.HasField("g") else []), *attr.graphs):
                    yield from values(g)

    if not any(d.HasField("dim_value") and d.dim_value < 0 for d in values(proto.graph)):
        return proto
    copy = type(proto)()
    copy.CopyFrom(proto)
    for d in values(copy.graph):
        if d.HasField("dim_value") and d.dim_value < 0:
            d.ClearField("dim_value")
    return copy
