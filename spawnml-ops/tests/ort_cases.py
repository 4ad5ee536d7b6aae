"""An op's declared cases run through onnxruntime as single-node models, to hold host-only
references (string and ai.onnx.ml ops) to onnxruntime."""

from __future__ import annotations

from typing import Any

import numpy as np

from spawnml.op import Node, OpCase, OpDef


def node_model(op: OpDef, case: OpCase, opset: int) -> Any:
    """A ModelProto with one node of ``op`` running ``case`` (outputs untyped)."""
    import onnx
    from onnx import helper, numpy_helper

    attrs = {k: numpy_helper.from_array(v) if isinstance(v, np.ndarray) else v
             for k, v in case.attrs.items()}
    ins = [f"i{k}" for k in range(len(case.inputs))]
    outs = [f"o{k}" for k in range(case.n_outputs)]
    node = helper.make_node(op.op_type, ins, outs, domain=op.domain, **attrs)
    infos = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
             for n, a in zip(ins, case.inputs)]
    imports = [helper.make_opsetid("", 21)]
    if op.domain:
        imports.append(helper.make_opsetid(op.domain, opset))
    graph = helper.make_graph([node], "g", infos, [onnx.ValueInfoProto(name=n) for n in outs])
    return helper.make_model(graph, opset_imports=imports, ir_version=10)


def assert_matches_onnxruntime(op: OpDef, case: OpCase, opset: int, rtol: float = 1e-5,
                               atol: float = 1e-6) -> None:
    """op.reference equals onnxruntime on the case (strings and labels exactly)."""
    import onnxruntime as ort

    model = node_model(op, case, opset)
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    names = [f"i{k}" for k in range(len(case.inputs))]
    expected = session.run(None, dict(zip(names, case.inputs)))
    node = Node(op.op_type, names, [f"o{k}" for k in range(case.n_outputs)], dict(case.attrs),
                name=case.name, domain=op.domain, opset=opset)
    got = op.reference(node, case.inputs)
    for e, g in zip(expected, got):
        assert e.shape == g.shape, (e.shape, g.shape)
        if e.dtype.kind in "OUS":
            assert e.tolist() == g.tolist()
        else:
            np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=rtol,
                                       atol=atol, equal_nan=True)
