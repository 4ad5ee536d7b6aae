"""Structural checks of ONNX nodes against their schemas, before anything reads them.

Run by the importer on every node (subgraphs too) before the node is converted, constant
folded or handed to onnx's C++ shape inference, so a malformed node is an
:class:`InvalidModelError` naming the node and the field instead of an IndexError deep in an
op or an abort inside onnx. The checks are the ones onnxruntime applies when it loads a
model: input and output counts, required inputs present, attribute names and types,
required attributes. Nodes whose schema onnx does not know (plugin domains, ops newer than
the installed onnx) are left to their op definitions.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ..errors import InvalidModelError

_ATTRIBUTE_TYPES = {
    0: "UNDEFINED", 1: "FLOAT", 2: "INT", 3: "STRING", 4: "TENSOR", 5: "GRAPH",
    6: "FLOATS", 7: "INTS", 8: "STRINGS", 9: "TENSORS", 10: "GRAPHS",
    11: "SPARSE_TENSOR", 12: "SPARSE_TENSORS", 13: "TYPE_PROTO", 14: "TYPE_PROTOS",
}


@lru_cache(maxsize=4096)
def _schema(op_type: str, opset: int, domain: str) -> Any | None:
    from onnx import defs

    try:
        return defs.get_schema(op_type, opset, domain)
    except Exception:  # noqa: BLE001 - onnx's SchemaError: not an op onnx knows at this opset
        return None


def _type_name(code: int) -> str:
    return _ATTRIBUTE_TYPES.get(int(code), f"type code {code}")


def check_node(proto: Any, opset: int, domain: str, label: str) -> None:
    """Raise InvalidModelError when ``proto`` (a NodeProto of ``domain`` at ``opset``) does
    not match its ONNX schema; ``label`` names the node in the message."""
    schema = _schema(proto.op_type, int(opset), "" if domain == "ai.onnx" else domain)
    if schema is None:
        return
    what = f"node {label} ({proto.op_type}, opset {schema.since_version})"
    _check_counts(what, "inputs", len(proto.input), schema.min_input, schema.max_input)
    _check_counts(what, "outputs", len(proto.output), schema.min_output, schema.max_output)
    _check_required(what, "input", list(proto.input), schema.inputs)
    _check_required(what, "output", list(proto.output), schema.outputs)
    _check_attributes(what, proto, schema)


def _check_counts(what: str, kind: str, found: int, low: int, high: int) -> None:
    if low <= found <= high:
        return
    expected = f"{low}" if low == high else f"{low} to {high}" if high < 2**30 else f"≥ {low}"
    raise InvalidModelError(f"{what} takes {expected} {kind}, got {found}")


def _check_required(what: str, kind: str, names: list[str], formals: Any) -> None:
    from onnx.defs import OpSchema

    single = OpSchema.FormalParameterOption.Single
    for i, name in enumerate(names):
        if not formals:
            return
        formal = formals[min(i, len(formals) - 1)]
        if not name and formal.option == single:
            raise InvalidModelError(
                f"{what}: {kind} {i} ({formal.name}) is required but its name is empty"
            )


def _check_attributes(what: str, proto: Any, schema: Any) -> None:
    declared = schema.attributes
    seen: set[str] = set()
    for attr in proto.attribute:
        if attr.ref_attr_name:  # inside a function body: bound by the caller
            continue
        if attr.name in seen:
            raise InvalidModelError(f"{what}: attribute {attr.name!r} is given twice")
        seen.add(attr.name)
        spec = declared.get(attr.name)
        if spec is None:
            known = ", ".join(sorted(declared)) or "none"
            raise InvalidModelError(
                f"{what}: unknown attribute {attr.name!r} (the schema declares: {known})"
            )
        expected = int(spec.type.value)
        if int(attr.type) != expected:
            raise InvalidModelError(
                f"{what}: attribute {attr.name!r} must be {_type_name(expected)}, "
                f"got {_type_name(attr.type)}"
            )
    for name, spec in declared.items():
        if spec.required and name not in seen:
            raise InvalidModelError(f"{what}: required attribute {name!r} is missing")
