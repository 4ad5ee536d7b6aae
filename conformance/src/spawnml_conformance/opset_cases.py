"""Conformance cases per opset epoch: every seed case again at the first opset of each
other epoch of its op (where the op's semantics differ, :mod:`spawnml.opset_history`).

A seed is adapted to an older (or newer) signature by name, from the onnx schemas: inputs
keep their names (Resize 10's ``scales`` is input 1, 11's input 2); an input that the other
version spells as an attribute of the same name becomes that attribute with the seed's
value (ReduceSum/Squeeze/Unsqueeze ``axes``, Split ``split``, Clip ``min``/``max``, Pad
``pads`` and ``constant_value`` → ``value``, Upsample ``scales``, Dropout ``ratio``), and
the reverse. A seed that needs an attribute, input, output or element type the version does
not have is not adapted. Unset attributes keep that version's defaults, which is the point:
Softmax 1-12 with no ``axis`` normalises the input coerced to 2-D at axis 1. Each adapted
case must pass ``onnx.checker`` (with shape inference) at its opset.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from spawnml import opset_history
from spawnml.op import OpDef

from .cases import ConformanceCase, make_case

# input name -> the input or attribute names other versions give it
ALIASES = {
    ("Pad", "constant_value"): ("value",),
    ("Pad", "pads"): ("pads", "paddings"),
    ("BatchNormalization", "input_mean"): ("input_mean", "mean"),
    ("BatchNormalization", "input_var"): ("input_var", "var"),
}


def _schema(domain: str, op_type: str, opset: int) -> Any | None:
    found = None
    for schema in opset_history.schemas(domain, op_type):
        if schema.since_version <= opset:
            found = schema
    return found


def _type_name(array: np.ndarray) -> str:
    from onnx import TensorProto, helper

    return TensorProto.DataType.Name(helper.np_dtype_to_tensor_dtype(array.dtype)).lower()


def _allowed(schema: Any, formal: Any, array: np.ndarray) -> bool:
    constraints = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
    allowed = constraints.get(formal.type_str, [formal.type_str])
    return f"tensor({_type_name(array)})" in allowed


def _as_attribute(array: np.ndarray, attr: Any) -> Any:
    from onnx import AttributeProto

    kind = attr.type
    if kind == AttributeProto.INTS:
        return [int(v) for v in np.asarray(array).reshape(-1)]
    if kind == AttributeProto.FLOATS:
        return [float(v) for v in np.asarray(array).reshape(-1)]
    if kind == AttributeProto.INT and np.asarray(array).size == 1:
        return int(np.asarray(array).reshape(-1)[0])
    if kind == AttributeProto.FLOAT and np.asarray(array).size == 1:
        return float(np.asarray(array).reshape(-1)[0])
    return None


def _as_input(value: Any, formal: Any, schema: Any) -> np.ndarray | None:
    constraints = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
    allowed = constraints.get(formal.type_str, [formal.type_str])
    array = np.asarray(value)
    if array.dtype.kind == "i" and "tensor(int64)" in allowed:
        return array.astype(np.int64)
    if array.dtype.kind == "f":
        for name, dt in (("float", np.float32), ("double", np.float64)):
            if f"tensor({name})" in allowed:
                return array.astype(dt).reshape(() if array.ndim == 0 else -1)
    return None


def adapt(seed: ConformanceCase, opset: int) -> ConformanceCase | None:
    """``seed`` rewritten for ``opset``'s signature of its op (None: it cannot be)."""
    op = seed.op
    new, old = (_schema(op.domain, op.op_type, v) for v in (seed.node.opset, opset))
    if new is None or old is None:
        return None
    n_outputs = len(seed.node.outputs)
    if n_outputs > len(old.outputs) and not _variadic(old.outputs):
        return None
    old_inputs = [f.name for f in old.inputs]
    inputs: list[np.ndarray | None] = [None] * len(old_inputs)
    attrs: dict[str, Any] = {}
    variadic = _variadic(new.inputs) or _variadic(old.inputs)
    if variadic:
        if [f.name for f in new.inputs] != old_inputs:
            return None
        inputs = list(seed.inputs)
    else:
        for formal, array in zip(new.inputs, seed.inputs):
            if array is None:
                continue
            names = ALIASES.get((op.op_type, formal.name), (formal.name,))
            name = next((n for n in names if n in old.attributes), names[0])
            spelled = next((n for n in names if n in old_inputs), None)
            if spelled is not None:
                k = old_inputs.index(spelled)
                if not _allowed(old, old.inputs[k], array):
                    return None
                inputs[k] = array
            elif name in old.attributes:
                value = _as_attribute(array, old.attributes[name])
                if value is None:
                    return None
                attrs[name] = value
            else:
                return None
    for name, value in seed.node.attrs.items():
        if name in old.attributes:
            attrs[name] = value
        elif name in old_inputs and value is not None:
            k = old_inputs.index(name)
            found = _as_input(value, old.inputs[k], old)
            if found is None:
                return None
            inputs[k] = found
        else:
            return None
    if any(a.required and n not in attrs for n, a in old.attributes.items()):
        return None
    while inputs and inputs[-1] is None:
        inputs.pop()
    if not variadic and any(
        a is None and str(f.option).endswith("Single") for f, a in zip(old.inputs, inputs)
    ):
        return None  # a required input the seed does not give
    case = make_case(op, f"{seed.name}@opset{opset}", inputs, attrs, opset=opset,
                     n_outputs=n_outputs, rtol=seed.rtol, atol=seed.atol, origin="opset")
    if case is None or not _valid(case):
        return None
    case.seed = seed.seed
    return case


def _variadic(formals: Sequence[Any]) -> bool:
    return any(str(f.option).endswith("Variadic") for f in formals)


def _valid(case: ConformanceCase) -> bool:
    """The adapted node is valid ONNX at its opset (checker + strict shape inference)."""
    import onnx

    from .reference_check import onnx_model

    try:
        model = onnx_model(case)
        for out, info in zip(model.graph.output, case.outputs):
            out.type.tensor_type.ClearField("shape")
            for d in info.shape or ():
                out.type.tensor_type.shape.dim.add().dim_value = int(d)  # type: ignore[arg-type]
        onnx.checker.check_model(model)
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except Exception:  # noqa: BLE001 - any rejection: the case is not valid at that opset
        return False
    return True


def opset_cases(op: OpDef, seeds: Sequence[ConformanceCase]) -> list[ConformanceCase]:
    """Each seed at the first opset (that ``op`` supports) of every other epoch."""
    domain = "" if op.domain == "ai.onnx" else op.domain
    epochs = opset_history.epochs(domain, op.op_type)
    if len(epochs) < 2:
        return []
    out = []
    for seed in seeds:
        if seed.infer_error or seed.variant or seed.raises:
            continue
        home = opset_history.epoch_of(domain, op.op_type, seed.node.opset)
        for since, until in epochs:
            first = max(since, op.since_version)
            if (since, until) == home or not op.supports_opset(first):
                continue
            if until is not None and first >= until:
                continue
            found = adapt(seed, first)
            if found is not None:
                out.append(found)
    return out


def epochs_covered(op: OpDef, cases: Sequence[ConformanceCase]) -> dict[tuple, int]:
    """Cases per epoch that ``op`` supports (epochs with none included, as 0)."""
    domain = "" if op.domain == "ai.onnx" else op.domain
    counts: dict[tuple, int] = {}
    for since, until in opset_history.epochs(domain, op.op_type):
        first = max(since, op.since_version)
        if not op.supports_opset(first) or (until is not None and first >= until):
            continue
        counts[(since, until)] = sum(
            1 for c in cases if since <= c.node.opset and (until is None or c.node.opset < until)
        )
    return counts
