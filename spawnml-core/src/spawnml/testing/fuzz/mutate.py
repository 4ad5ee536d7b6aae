"""A model-bytes mutator: damages a valid seed model, deterministically from one integer seed.

Two layers. Structure-aware mutations edit the ``ModelProto`` (dims -1/0/huge, dropped or
extra node inputs, empty names, attribute type swaps, negative/huge axes, duplicate value
names, wrong dtypes, NaN/huge initializer values, bad sparse initializers, external-data
entries with NUL bytes, invalid UTF-8, missing length or huge offset, opset 0/huge, unknown
domains, recursive local functions, …). Byte mutations then flip, insert, delete, duplicate
or truncate bytes of the serialized proto. ``mutate(seed)`` picks a seed model and one to
three steps with ``numpy.random.default_rng(seed)``, so the same seed gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper, numpy_helper

from .seeds import SEEDS, seed_model

BAD_UTF8_MARK = "\x01BADUTF8\x01"
"""A 9-byte placeholder a structural mutation writes where it wants invalid UTF-8: protobuf
refuses to serialize such a string, so ``serialize`` swaps the bytes in afterwards."""
BAD_UTF8 = b"\xff\xfe\xfd\xc3\x28\xa0\xa1\xe2\x28"

WEIRD_INTS = (-1, 0, 1, 2, -2, 3, -100, 65537, 10**9, 2**31 - 1, 2**31, -(2**31), 2**32,
              2**62, 2**63 - 1, -(2**63))
WEIRD_FLOATS = (float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 1e30, -1e30, 1e-45,
                3.4e38, -1.0, 1e6)
WEIRD_STRINGS = ("", "bogus", "\x00", "a\x00b", BAD_UTF8_MARK, "x" * 4096, "NCHW", "linear")
WEIRD_DTYPES = (0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16, 17, 19, 21, 22, 40, -1,
                2**31 - 1)
WEIRD_OPSETS = (0, -1, 1, 5, 6, 11, 22, 23, 99, 10**6, 2**63 - 1, -(2**63))

Rng = np.random.Generator
Mutation = Callable[[onnx.ModelProto, Rng], str]


@dataclass
class Mutated:
    """One mutated model: its bytes, the seed model it came from and the steps applied."""

    model: bytes
    seed_name: str
    steps: list[str] = field(default_factory=list)


def _pick(rng: Rng, seq: Sequence[Any]) -> Any:
    return seq[int(rng.integers(len(seq)))]


def _value_infos(g: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    return [*g.input, *g.output, *g.value_info]


def _value_names(g: onnx.GraphProto) -> list[str]:
    names = [v.name for v in _value_infos(g)] + [t.name for t in g.initializer]
    names += [o for n in g.node for o in n.output]
    return names or ["x"]


def _node(model: onnx.ModelProto, rng: Rng) -> onnx.NodeProto | None:
    nodes = model.graph.node
    return nodes[int(rng.integers(len(nodes)))] if len(nodes) else None


def _weird_int(rng: Rng) -> int:
    return int(_pick(rng, WEIRD_INTS))


# -- structure-aware mutations --------------------------------------------------------------
def mutate_dims(model: onnx.ModelProto, rng: Rng) -> str:
    """Change a declared dim of an input/output/value_info (-1, 0, huge, a param, none)."""
    infos = [v for v in _value_infos(model.graph) if v.type.HasField("tensor_type")]
    if not infos:
        return "dims: no tensor value"
    vi = _pick(rng, infos)
    shape = vi.type.tensor_type.shape
    action = int(rng.integers(5))
    if action == 0 and len(shape.dim):
        dim = shape.dim[int(rng.integers(len(shape.dim)))]
        dim.dim_value = _weird_int(rng)
        return f"dims: {vi.name} dim -> {dim.dim_value}"
    if action == 1 and len(shape.dim):
        dim = shape.dim[int(rng.integers(len(shape.dim)))]
        dim.dim_param = _pick(rng, ("", "N", BAD_UTF8_MARK, "?", "N N"))
        return f"dims: {vi.name} dim -> param {dim.dim_param!r}"
    if action == 2:
        vi.type.tensor_type.ClearField("shape")
        return f"dims: {vi.name} shape cleared"
    if action == 3:
        shape.dim.add().dim_value = int(_pick(rng, (0, 1, 7, 2**40)))
        return f"dims: {vi.name} extra dim"
    if len(shape.dim):
        del shape.dim[int(rng.integers(len(shape.dim)))]
        return f"dims: {vi.name} dim removed"
    vi.type.tensor_type.shape.Clear()  # a rank-0 declaration
    return f"dims: {vi.name} rank 0"


def mutate_initializer_dims(model: onnx.ModelProto, rng: Rng) -> str:
    """Make an initializer's dims disagree with its data (-1, 0, huge, extra, missing)."""
    inits = model.graph.initializer
    if not len(inits):
        return "init dims: none"
    t = inits[int(rng.integers(len(inits)))]
    action = int(rng.integers(4))
    if action == 0 and len(t.dims):
        i = int(rng.integers(len(t.dims)))
        t.dims[i] = _weird_int(rng)
        return f"init dims: {t.name}[{i}] -> {t.dims[i]}"
    if action == 1:
        t.dims.append(int(_pick(rng, (0, 1, 3, 2**33))))
        return f"init dims: {t.name} extra dim"
    if action == 2 and len(t.dims):
        del t.dims[-1]
        return f"init dims: {t.name} dim removed"
    t.ClearField("dims")
    return f"init dims: {t.name} cleared"


def mutate_node_inputs(model: onnx.ModelProto, rng: Rng) -> str:
    """Drop, add, empty or rename a node input (unknown names, later outputs, many inputs)."""
    node = _node(model, rng)
    if node is None:
        return "inputs: no node"
    names = _value_names(model.graph)
    action = int(rng.integers(6))
    if action == 0 and len(node.input):
        i = int(rng.integers(len(node.input)))
        del node.input[i]
        return f"inputs: {node.name} dropped input {i}"
    if action == 1:
        node.input.append(_pick(rng, names))
        return f"inputs: {node.name} extra input {node.input[-1]}"
    if action == 2:
        node.input.append(_pick(rng, ("ghost", "", BAD_UTF8_MARK)))
        return f"inputs: {node.name} unknown input {node.input[-1]!r}"
    if action == 3 and len(node.input):
        i = int(rng.integers(len(node.input)))
        node.input[i] = ""
        return f"inputs: {node.name} input {i} emptied"
    if action == 4 and len(node.input):
        outs = [o for n in model.graph.node for o in n.output] or ["ghost"]
        i = int(rng.integers(len(node.input)))
        node.input[i] = _pick(rng, outs)  # maybe its own or a later node's output
        return f"inputs: {node.name} input {i} -> {node.input[i]}"
    node.input.extend([node.input[0] if len(node.input) else "x"] * int(rng.integers(2, 200)))
    return f"inputs: {node.name} now {len(node.input)} inputs"


def mutate_node_outputs(model: onnx.ModelProto, rng: Rng) -> str:
    """Drop, add, empty or duplicate a node output."""
    node = _node(model, rng)
    if node is None:
        return "outputs: no node"
    action = int(rng.integers(4))
    if action == 0 and len(node.output):
        del node.output[int(rng.integers(len(node.output)))]
        return f"outputs: {node.name} dropped an output"
    if action == 1:
        node.output.append(_pick(rng, ("extra", "", node.output[0] if node.output else "y")))
        return f"outputs: {node.name} extra output {node.output[-1]!r}"
    if action == 2 and len(node.output):
        node.output[0] = ""
        return f"outputs: {node.name} output 0 emptied"
    if len(node.output):
        node.output[0] = _pick(rng, _value_names(model.graph))
        return f"outputs: {node.name} output 0 -> {node.output[0]} (duplicate)"
    return "outputs: nothing to change"


_ATTR_TYPES = (AttributeProto.INT, AttributeProto.INTS, AttributeProto.STRING,
               AttributeProto.FLOAT, AttributeProto.FLOATS, AttributeProto.UNDEFINED,
               AttributeProto.STRINGS, AttributeProto.TENSOR, AttributeProto.GRAPH)


def _set_attr_value(attr: AttributeProto, kind: int, rng: Rng) -> None:
    if kind == AttributeProto.INT:
        attr.i = _weird_int(rng)
    elif kind == AttributeProto.INTS:
        attr.ints.extend([_weird_int(rng) for _ in range(int(rng.integers(0, 5)))])
    elif kind == AttributeProto.STRING:
        attr.s = _pick(rng, WEIRD_STRINGS).encode()
    elif kind == AttributeProto.FLOAT:
        attr.f = float(_pick(rng, WEIRD_FLOATS))
    elif kind == AttributeProto.FLOATS:
        attr.floats.extend([float(_pick(rng, WEIRD_FLOATS)) for _ in range(3)])
    elif kind == AttributeProto.STRINGS:
        attr.strings.extend([b"a", b"", BAD_UTF8_MARK.encode()])
    elif kind == AttributeProto.TENSOR:
        attr.t.CopyFrom(numpy_helper.from_array(np.asarray([1.0, np.nan], np.float32)))
    elif kind == AttributeProto.GRAPH:
        attr.g.CopyFrom(helper.make_graph([], "empty", [], []))


def mutate_attribute_type(model: onnx.ModelProto, rng: Rng) -> str:
    """Swap an attribute's type (INT/INTS/STRING/FLOAT/UNDEFINED/…), with or without its old
    value field still set."""
    node = _node(model, rng)
    if node is None:
        return "attr type: no node"
    if not len(node.attribute):
        node.attribute.add().name = _pick(rng, ("axis", "mode", "alpha", "perm", "to"))
    attr = node.attribute[int(rng.integers(len(node.attribute)))]
    old = attr.type
    kind = int(_pick(rng, _ATTR_TYPES))
    if rng.random() < 0.6:
        name = attr.name
        attr.Clear()
        attr.name = name
    attr.type = kind
    _set_attr_value(attr, kind, rng)
    return f"attr type: {node.name}.{attr.name} {old} -> {kind}"


def mutate_attribute_value(model: onnx.ModelProto, rng: Rng) -> str:
    """Give an attribute a weird value of its own type: negative/huge axes, NaN alphas, unknown
    modes, empty or long lists."""
    nodes = [n for n in model.graph.node if len(n.attribute)]
    if not nodes:
        return "attr value: no attribute"
    node = _pick(rng, nodes)
    attr = node.attribute[int(rng.integers(len(node.attribute)))]
    if attr.type == AttributeProto.INTS and len(attr.ints) and rng.random() < 0.7:
        attr.ints[int(rng.integers(len(attr.ints)))] = _weird_int(rng)
    elif attr.type == AttributeProto.INTS:
        attr.ClearField("ints")
        attr.ints.extend([_weird_int(rng) for _ in range(int(rng.integers(0, 9)))])
    elif attr.type == AttributeProto.FLOATS:
        attr.ClearField("floats")
        attr.floats.extend([float(_pick(rng, WEIRD_FLOATS)) for _ in range(2)])
    else:
        _set_attr_value(attr, attr.type, rng)
    return f"attr value: {node.name}.{attr.name}"


def mutate_attribute_set(model: onnx.ModelProto, rng: Rng) -> str:
    """Remove an attribute, add an unknown one, or repeat one under the same name."""
    node = _node(model, rng)
    if node is None:
        return "attr set: no node"
    action = int(rng.integers(3))
    if action == 0 and len(node.attribute):
        del node.attribute[int(rng.integers(len(node.attribute)))]
        return f"attr set: {node.name} attribute removed"
    if action == 1 and len(node.attribute):
        node.attribute.append(node.attribute[0])
        _set_attr_value(node.attribute[-1], node.attribute[-1].type, rng)
        return f"attr set: {node.name}.{node.attribute[0].name} repeated"
    attr = node.attribute.add()
    attr.name = _pick(rng, ("bogus", "", "axis", "axes", BAD_UTF8_MARK, "auto_pad"))
    attr.type = int(_pick(rng, _ATTR_TYPES))
    _set_attr_value(attr, attr.type, rng)
    return f"attr set: {node.name} added {attr.name!r}"


def mutate_duplicate_names(model: onnx.ModelProto, rng: Rng) -> str:
    """Duplicate a value name: a second initializer or graph input of the same name, a node
    output named like an input, two nodes with one name."""
    g = model.graph
    action = int(rng.integers(4))
    if action == 0 and len(g.initializer):
        t = g.initializer.add()
        t.CopyFrom(g.initializer[int(rng.integers(len(g.initializer) - 1))])
        if t.data_type == TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(np.zeros((2, 2), np.float32), t.name))
        return f"dup: initializer {t.name} twice"
    if action == 1 and len(g.input):
        g.input.append(g.input[int(rng.integers(len(g.input)))])
        return f"dup: graph input {g.input[-1].name} twice"
    if action == 2 and len(g.node) and len(g.input):
        node = _node(model, rng)
        assert node is not None
        if len(node.output):
            node.output[0] = g.input[0].name
            return f"dup: {node.name} writes graph input {g.input[0].name}"
    if len(g.node) > 1:
        g.node[1].name = g.node[0].name
        g.node[1].output[0:1] = g.node[0].output[0:1]
        return "dup: two nodes with one name and output"
    g.output.append(g.output[0] if len(g.output) else helper.make_empty_tensor_value_info("y"))
    return "dup: graph output twice"


def mutate_dtype(model: onnx.ModelProto, rng: Rng) -> str:
    """Change the element type of a declared value or an initializer (unknown codes too)."""
    g = model.graph
    code = int(_pick(rng, WEIRD_DTYPES))
    if rng.random() < 0.5 and len(g.initializer):
        t = g.initializer[int(rng.integers(len(g.initializer)))]
        t.data_type = code
        return f"dtype: initializer {t.name} -> {code}"
    infos = [v for v in _value_infos(g) if v.type.HasField("tensor_type")]
    if not infos:
        return "dtype: nothing typed"
    vi = _pick(rng, infos)
    vi.type.tensor_type.elem_type = code
    return f"dtype: {vi.name} -> {code}"


def mutate_initializer_values(model: onnx.ModelProto, rng: Rng) -> str:
    """Put NaN/±inf/huge values into a float initializer (scales, weights) or weird integers
    into an int64 one (shapes, pads, starts, k, axes)."""
    inits = [t for t in model.graph.initializer  # never external: onnx would read the file
             if t.data_type in (TensorProto.FLOAT, TensorProto.INT64)
             and t.data_location != TensorProto.EXTERNAL]
    if not inits:
        return "values: no initializer"
    t = _pick(rng, inits)
    try:
        array = numpy_helper.to_array(t).copy()
    except Exception:  # noqa: BLE001 - an earlier step damaged it: leave it damaged
        return f"values: {t.name} unreadable"
    if array.size == 0:
        return f"values: {t.name} empty"
    flat = array.reshape(-1)
    for _ in range(int(rng.integers(1, 3))):
        i = int(rng.integers(flat.size))
        flat[i] = _pick(rng, WEIRD_FLOATS) if array.dtype == np.float32 else _weird_int(rng)
    t.CopyFrom(numpy_helper.from_array(array, t.name))
    return f"values: {t.name}"


def mutate_raw_data(model: onnx.ModelProto, rng: Rng) -> str:
    """Truncate or extend an initializer's raw bytes, or give it raw and typed data at once."""
    inits = model.graph.initializer
    if not len(inits):
        return "raw: no initializer"
    t = inits[int(rng.integers(len(inits)))]
    action = int(rng.integers(3))
    if action == 0 and t.raw_data:
        t.raw_data = t.raw_data[: int(rng.integers(len(t.raw_data)))]
        return f"raw: {t.name} truncated"
    if action == 1:
        t.raw_data = bytes(t.raw_data) + b"\x00" * int(rng.integers(1, 9))
        return f"raw: {t.name} extended"
    t.float_data.extend([1.0, 2.0])
    t.int64_data.extend([7])
    return f"raw: {t.name} raw and typed data"


def mutate_sparse(model: onnx.ModelProto, rng: Rng) -> str:
    """Replace (or shadow) an initializer with a sparse one with bad dims or indices."""
    g = model.graph
    name = g.initializer[0].name if len(g.initializer) else "x"
    if len(g.initializer) and rng.random() < 0.7:
        victim = g.initializer[int(rng.integers(len(g.initializer)))]
        name = victim.name
        if rng.random() < 0.8:
            g.initializer.remove(victim)
    n_values = int(rng.integers(0, 4))
    values = numpy_helper.from_array(rng.standard_normal(n_values).astype(np.float32), name)
    choice = int(rng.integers(4))
    index_sets = (
        [0, 1, 2], [5, 2**40, -3], [[0, 0], [9, 9]], [3, 1, 1],
    )
    indices = numpy_helper.from_array(np.asarray(index_sets[choice], np.int64), "")
    dims = [_weird_int(rng) for _ in range(int(rng.integers(0, 4)))]
    g.sparse_initializer.append(helper.make_sparse_tensor(values, indices, dims))
    return f"sparse: {name} dims {dims} indices {index_sets[choice]}"


def mutate_external_data(model: onnx.ModelProto, rng: Rng) -> str:
    """Point an initializer at external data: NUL bytes or invalid UTF-8 in the location,
    paths out of the model folder, missing length, negative or huge offsets, unknown keys."""
    inits = model.graph.initializer
    if not len(inits):
        return "external: no initializer"
    t = inits[int(rng.integers(len(inits)))]
    t.data_location = TensorProto.EXTERNAL
    if rng.random() < 0.8:
        t.ClearField("raw_data")
    entries: list[tuple[str, str]] = []
    if rng.random() < 0.9:
        entries.append(("location", _pick(rng, (
            "w\x00.bin", BAD_UTF8_MARK, "/etc/passwd", "../../../../etc/hostname", "", "w.bin",
            "/dev/zero", "."))))
    if rng.random() < 0.6:
        entries.append(("offset", _pick(rng, ("0", "-1", str(2**70), "abc", "4096", ""))))
    if rng.random() < 0.5:
        entries.append(("length", _pick(rng, ("0", "-5", str(2**63), "1e3", "4", ""))))
    if rng.random() < 0.2:
        entries.append((_pick(rng, ("checksum", "bogus", BAD_UTF8_MARK)), "x"))
    for key, value in entries:
        entry = t.external_data.add()
        entry.key, entry.value = key, value
    return f"external: {t.name} {entries!r}"


def mutate_opset(model: onnx.ModelProto, rng: Rng) -> str:
    """Opset version 0, negative or huge; no default domain; a domain imported twice; an odd
    ir_version."""
    action = int(rng.integers(4))
    if action == 0 and len(model.opset_import):
        model.opset_import[0].version = int(_pick(rng, WEIRD_OPSETS))
        return f"opset: default -> {model.opset_import[0].version}"
    if action == 1:
        del model.opset_import[:]
        return "opset: none imported"
    if action == 2:
        model.opset_import.add(domain="", version=int(_pick(rng, WEIRD_OPSETS)))
        return "opset: default domain twice"
    model.ir_version = int(_pick(rng, (0, 1, 3, -1, 12, 99, 2**62)))
    return f"opset: ir_version {model.ir_version}"


def mutate_domain(model: onnx.ModelProto, rng: Rng) -> str:
    """Move a node to an unknown/other domain, or give it an unknown or empty op_type."""
    node = _node(model, rng)
    if node is None:
        return "domain: no node"
    if rng.random() < 0.6:
        node.domain = _pick(rng, ("com.fuzz", "ai.onnx.ml", "com.microsoft", "ai.onnx",
                                  BAD_UTF8_MARK, "ai.onnx.preview.training"))
        if rng.random() < 0.5:
            model.opset_import.add(domain=node.domain, version=int(_pick(rng, WEIRD_OPSETS)))
        return f"domain: {node.name} -> {node.domain!r}"
    node.op_type = _pick(rng, ("", "Bogus", node.op_type.lower(), node.op_type + "\x00",
                               BAD_UTF8_MARK, "If", "Loop", "Scan", "Constant"))
    return f"domain: {node.name} op_type -> {node.op_type!r}"


def mutate_nodes(model: onnx.ModelProto, rng: Rng) -> str:
    """Delete, duplicate or reorder nodes, or feed a node its own output (a cycle)."""
    nodes = model.graph.node
    if not len(nodes):
        return "nodes: none"
    i = int(rng.integers(len(nodes)))
    action = int(rng.integers(4))
    if action == 0:
        del nodes[i]
        return f"nodes: deleted {i}"
    if action == 1:
        nodes.append(nodes[i])
        return f"nodes: duplicated {i}"
    if action == 2 and len(nodes) > 1:
        a, b = nodes[0], nodes[len(nodes) - 1]
        first, last = onnx.NodeProto(), onnx.NodeProto()
        first.CopyFrom(b)
        last.CopyFrom(a)
        nodes[0].CopyFrom(first)
        nodes[len(nodes) - 1].CopyFrom(last)
        return "nodes: first and last swapped"
    if len(nodes[i].input) and len(nodes[i].output):
        nodes[i].input[0] = nodes[i].output[0]
        return f"nodes: {i} consumes its own output"
    return "nodes: nothing to change"


def mutate_graph_io(model: onnx.ModelProto, rng: Rng) -> str:
    """Remove every output, declare an output nothing produces, drop a consumed input, list an
    initializer as an input."""
    g = model.graph
    action = int(rng.integers(4))
    if action == 0:
        del g.output[:]
        return "io: no outputs"
    if action == 1:
        g.output.append(helper.make_tensor_value_info(
            _pick(rng, ("ghost", g.input[0].name if len(g.input) else "x")),
            TensorProto.FLOAT, None))
        return f"io: output {g.output[-1].name}"
    if action == 2 and len(g.input):
        del g.input[int(rng.integers(len(g.input)))]
        return "io: input removed"
    if len(g.initializer):
        t = g.initializer[int(rng.integers(len(g.initializer)))]
        g.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        return f"io: initializer {t.name} is an input too"
    return "io: nothing to change"


def mutate_strings(model: onnx.ModelProto, rng: Rng) -> str:
    """Rename a value everywhere or in one place only, to invalid UTF-8, NUL or a long name."""
    g = model.graph
    old = _pick(rng, _value_names(g))
    new = _pick(rng, (BAD_UTF8_MARK, "a\x00b", "n" * 10000, " ", "0", "/../x"))
    everywhere = rng.random() < 0.6
    for v in _value_infos(g):
        if v.name == old:
            v.name = new
    for t in g.initializer:
        if t.name == old and everywhere:
            t.name = new
    for n in g.node:
        for field_ in (n.input, n.output):
            for i, name in enumerate(field_):
                if name == old and (everywhere or rng.random() < 0.5):
                    field_[i] = new
    return f"strings: {old!r} -> {new[:12]!r} ({'everywhere' if everywhere else 'partly'})"


def mutate_subgraph(model: onnx.ModelProto, rng: Rng) -> str:
    """Wrap a value in an If node whose branches read outer names (some that do not exist)."""
    g = model.graph
    if not len(g.node) or not len(g.node[-1].output):
        return "subgraph: no node"
    src = g.node[-1].output[0]
    outer = _pick(rng, (src, "ghost", ""))
    then = helper.make_graph([helper.make_node("Identity", [outer], ["t"])], "then", [],
                             [helper.make_empty_tensor_value_info("t")])
    other = helper.make_graph([helper.make_node("Neg", [src], ["e"])], "else", [],
                              [helper.make_empty_tensor_value_info("e")])
    if rng.random() < 0.3:
        del other.output[:]
    g.initializer.append(numpy_helper.from_array(np.asarray(bool(rng.random() < 0.5)), "cond"))
    g.node.append(helper.make_node("If", ["cond"], ["if_out"], then_branch=then,
                                   else_branch=other, name="if"))
    g.output.append(helper.make_empty_tensor_value_info("if_out"))
    return f"subgraph: If reading {outer!r}"


def mutate_function(model: onnx.ModelProto, rng: Rng) -> str:
    """Route a node through a model-local function: recursive, missing its opset import, or
    with a body that reads an unknown name."""
    node = _node(model, rng)
    if node is None or not len(node.input) or not len(node.output):
        return "function: no node"
    kind = int(rng.integers(3))
    body_in = "fx" if kind != 2 else "nowhere"
    body_op = "F" if kind == 0 else "Relu"
    body = [helper.make_node(body_op, [body_in], ["fy"],
                             domain="local" if kind == 0 else "")]
    imports = [] if kind == 1 else [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
    fn = helper.make_function("local", "F", ["fx"], ["fy"], body, imports)
    model.functions.append(fn)
    model.opset_import.add(domain="local", version=1)
    node.op_type, node.domain = "F", "local"
    del node.input[1:]
    del node.output[1:]
    del node.attribute[:]
    return f"function: {node.name} -> local F ({('recursive', 'no opset', 'unknown name')[kind]})"


STRUCTURAL: tuple[Mutation, ...] = (
    mutate_dims, mutate_initializer_dims, mutate_node_inputs, mutate_node_outputs,
    mutate_attribute_type, mutate_attribute_value, mutate_attribute_set, mutate_duplicate_names,
    mutate_dtype, mutate_initializer_values, mutate_raw_data, mutate_sparse,
    mutate_external_data, mutate_opset, mutate_domain, mutate_nodes, mutate_graph_io,
    mutate_strings, mutate_subgraph, mutate_function,
)


# -- byte mutations ---------------------------------------------------------------------------
def mutate_bytes(data: bytes, rng: Rng) -> tuple[bytes, str]:
    """One byte-level change: flip bits, overwrite with 0x00/0xff/0x7f/0x80, insert random
    bytes, delete a range, duplicate a chunk, write an over-long varint, or truncate."""
    if not data:
        return b"\x0a", "bytes: empty -> one tag"
    buf = bytearray(data)
    n = len(buf)
    pos = int(rng.integers(n))
    action = int(rng.integers(7))
    if action == 0:
        for _ in range(int(rng.integers(1, 9))):
            buf[int(rng.integers(n))] ^= 1 << int(rng.integers(8))
        return bytes(buf), "bytes: bit flips"
    if action == 1:
        buf[pos] = int(_pick(rng, (0x00, 0xFF, 0x7F, 0x80, 0x01)))
        return bytes(buf), f"bytes: overwrite at {pos}"
    if action == 2:
        chunk = rng.integers(0, 256, int(rng.integers(1, 17)), dtype=np.uint8).tobytes()
        return bytes(buf[:pos]) + chunk + bytes(buf[pos:]), f"bytes: insert at {pos}"
    if action == 3:
        end = min(n, pos + int(rng.integers(1, 33)))
        return bytes(buf[:pos] + buf[end:]), f"bytes: delete {pos}:{end}"
    if action == 4:
        end = min(n, pos + int(rng.integers(1, 65)))
        at = int(rng.integers(n))
        return bytes(buf[:at]) + bytes(buf[pos:end]) + bytes(buf[at:]), "bytes: duplicate chunk"
    if action == 5:
        return bytes(buf[:pos]) + b"\xff" * 10 + bytes(buf[pos + 1:]), f"bytes: varint at {pos}"
    return bytes(buf[:pos]), f"bytes: truncate at {pos}"


def serialize(model: onnx.ModelProto) -> bytes:
    """The model's bytes, with each ``BAD_UTF8_MARK`` replaced by invalid UTF-8."""
    data = model.SerializeToString(deterministic=True)
    return data.replace(BAD_UTF8_MARK.encode(), BAD_UTF8)


def mutate(seed: int) -> Mutated:
    """A mutated seed model, the same for the same ``seed``: 80% one to three structural steps
    (then sometimes byte steps too), 20% byte steps only."""
    rng = np.random.default_rng(seed)
    name = _pick(rng, sorted(SEEDS))
    model = seed_model(name)
    steps: list[str] = []
    structural = rng.random() < 0.8
    if structural:
        for _ in range(int(rng.integers(1, 4))):
            steps.append(_pick(rng, STRUCTURAL)(model, rng))
    data = serialize(model)
    if not structural or rng.random() < 0.15:
        for _ in range(int(rng.integers(1, 4))):
            data, step = mutate_bytes(data, rng)
            steps.append(step)
    return Mutated(data, name, steps)
