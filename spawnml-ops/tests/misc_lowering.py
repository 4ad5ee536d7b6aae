"""Shared by the losses/sampling/signal/misc tests: assert a case runs as device kernels
(``lower`` succeeds with the values a planner would know), so a HostOnly fallback cannot
pass a kernel test silently."""

from __future__ import annotations

import numpy as np

from spawnml.dtypes import from_numpy
from spawnml.op import OpCase, OpDef, TensorInfo
from spawnml.testing.op_check import case_node


def assert_lowers(op: OpDef, case: OpCase) -> None:
    node = case_node(op, case)
    infos = [None if a is None else TensorInfo(from_numpy(np.asarray(a).dtype), np.shape(a))
             for a in case.inputs]
    values = [a if i in op.value_inputs else None for i, a in enumerate(case.inputs)]
    outputs = op.infer(node, infos, values)
    low = op.lower(node, infos, outputs, values)
    assert low.launches, f"{op.op_type} case {case.name} lowered to no launches"
