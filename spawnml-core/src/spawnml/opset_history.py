"""Where an ONNX op's semantics change across opsets, read from the onnx schemas.

``onnx.defs.get_all_schemas_with_history()`` holds one schema per version of each op
(``since_version``). A new version that only widens the type lists (Relu 13 → 14 adds
bfloat16) keeps the op's meaning; one that adds, removes or renames an attribute, input or
output, changes an attribute's default or whether it is required (Softmax 13: ``axis``
default 1 → -1 and no 2-D coercion; ReduceSum 13: ``axes`` attribute → input; Clip 11:
``min``/``max`` attributes → inputs) changes it. The versions between two such changes
are one *epoch* of the op: a backend kernel or a conformance case written for one
version of an epoch holds for the whole epoch.

Used by placement (the default opset range of a backend kernel that declares none, see
:class:`spawnml.op.BackendKernel`) and by the conformance suite (a case per epoch).
"""

from __future__ import annotations

import functools
from typing import Any

Epoch = tuple[int, int | None]  # (first opset, first opset of the next epoch or None)


def _domain(domain: str) -> str:
    return "" if domain in ("", "ai.onnx") else domain


@functools.cache
def _history() -> dict[tuple[str, str], list[Any]]:
    import onnx.defs

    found: dict[tuple[str, str], list[Any]] = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        found.setdefault((schema.domain, schema.name), []).append(schema)
    for schemas in found.values():
        schemas.sort(key=lambda s: s.since_version)
    return found


def schemas(domain: str, op_type: str) -> list[Any]:
    """Every version's schema of the op, oldest first (empty for ops onnx does not define)."""
    return list(_history().get((_domain(domain), op_type), []))


def signature(schema: Any) -> tuple:
    """What a version of an op means, as far as a schema states it: attribute names with
    required/default, input and output names with their optionality."""
    attrs = tuple(sorted(
        (name, bool(a.required), a.default_value.SerializeToString())
        for name, a in schema.attributes.items()
    ))
    inputs = tuple((p.name, str(p.option)) for p in schema.inputs)
    outputs = tuple((p.name, str(p.option)) for p in schema.outputs)
    return attrs, inputs, outputs


@functools.cache
def epochs(domain: str, op_type: str) -> tuple[Epoch, ...]:
    """The op's epochs, oldest first; ``()`` for an op without onnx schemas."""
    found: list[list[int]] = []
    last = None
    for schema in schemas(domain, op_type):
        sig = signature(schema)
        if sig != last:
            found.append([schema.since_version])
            last = sig
    return tuple(
        (since, found[k + 1][0] if k + 1 < len(found) else None)
        for k, (since,) in enumerate(found)
    )


def epoch_of(domain: str, op_type: str, opset: int) -> Epoch | None:
    """The epoch holding ``opset`` (None: the op has no schema at or below it)."""
    for since, until in epochs(domain, op_type):
        if since <= opset and (until is None or opset < until):
            return since, until
    return None


def latest_epoch(domain: str, op_type: str) -> Epoch | None:
    """The epoch of the op's newest version (None for ops onnx does not define)."""
    found = epochs(domain, op_type)
    return found[-1] if found else None


def changing_ops(domain: str = "") -> dict[str, tuple[Epoch, ...]]:
    """Every op of ``domain`` whose semantics change at least once: op_type -> epochs."""
    wanted = _domain(domain)
    return {
        name: epochs(dom, name)
        for dom, name in _history()
        if dom == wanted and len(epochs(dom, name)) > 1
    }
