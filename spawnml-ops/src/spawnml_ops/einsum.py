"""Einsum: the equation is parsed when lowering into generic contractions.

One or two operands run as a single ``contract`` launch; more operands are contracted
pairwise left to right, each intermediate keeping only the labels still needed.
"""

from __future__ import annotations

import re
import string

import numpy as np

from spawnml.dtypes import DType
from spawnml.op import In, Lowering, Node, OpCase, OpDef, Out, TensorInfo

from .common import check_dtype, static_shape
from .contraction import Contraction

NUMERIC = (DType.float32, DType.float16, DType.float64, DType.int32, DType.int64,
           DType.uint32, DType.int8, DType.int16, DType.uint8, DType.uint16, DType.uint64,
           DType.bfloat16)
_LABEL = re.compile(r"^([a-zA-Z]|\.\.\.)*$")


def parse_equation(op: OpDef, node: Node, ranks: list[int]) -> tuple[list[str], str]:
    """Per-operand label strings and the output labels, with ``...`` expanded to digits."""
    equation = str(op.attr(node, "equation", required=True)).replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise op.fail(node, f"attribute 'equation' = {equation!r} names {len(terms)} operands, "
                            f"the node has {len(ranks)}")
    if not all(_LABEL.match(t) for t in [*terms, rhs]):
        raise op.fail(node, f"attribute 'equation' = {equation!r} is malformed")
    ell = 0
    for term, rank in zip(terms, ranks):
        explicit = len(term.replace("...", ""))
        if "..." in term:
            ell = max(ell, rank - explicit)
        elif explicit != rank:
            raise op.fail(node, f"attribute 'equation' term {term!r} does not match rank {rank}")
    ell_labels = string.digits[:ell]  # digits never clash with letters

    def expand(term: str, rank: int) -> str:
        n = rank - len(term.replace("...", ""))
        if n < 0:
            raise op.fail(node, f"attribute 'equation' term {term!r} exceeds rank {rank}")
        return term.replace("...", ell_labels[ell - n:])

    labels = [expand(t, r) for t, r in zip(terms, ranks)]
    if arrow:
        out = rhs.replace("...", ell_labels)
    else:  # implicit: broadcast dims, then the labels used once, alphabetically
        letters = "".join(t.replace("...", "") for t in terms)
        out = ell_labels + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    if len(set(out)) != len(out) or not set(out) <= set("".join(labels)):
        raise op.fail(node, f"attribute 'equation' = {equation!r} has a bad output {rhs!r}")
    return labels, out


class Einsum(OpDef):
    op_type = "Einsum"
    since_version = 12

    def _plan(self, node: Node, inputs) -> tuple[list[tuple[tuple[int, ...], str]], str]:
        if not inputs or any(i is None for i in inputs):
            raise self.fail(node, "expects at least one input, none omitted")
        dts = {i.dtype for i in inputs}
        if len(dts) != 1:
            raise self.fail(node, f"inputs must share one dtype, got {sorted(map(str, dts))}")
        check_dtype(node, inputs[0].dtype, NUMERIC)
        if any(not i.is_static for i in inputs):
            raise self.fail(node, "Einsum needs static input shapes")
        shapes = [static_shape(i) for i in inputs]
        labels, out = parse_equation(self, node, [len(s) for s in shapes])
        operands = list(zip(shapes, labels))
        Contraction(operands, out).sizes(node)  # checks the label sizes agree
        return operands, out

    def infer(self, node, inputs, values) -> list[TensorInfo]:
        operands, out = self._plan(node, inputs)
        return [TensorInfo(inputs[0].dtype, Contraction(operands, out).out_shape(node))]

    def reference(self, node, inputs) -> list[np.ndarray]:
        labels, out = parse_equation(self, node, [a.ndim for a in inputs])
        letters = {c: string.ascii_letters[i] for i, c in enumerate(sorted(set("".join(labels))))}
        eq = ",".join("".join(letters[c] for c in t) for t in labels)
        eq += "->" + "".join(letters[c] for c in out)
        # Broadcast size-1 axes first: numpy.einsum does not broadcast repeated labels.
        sizes = Contraction(list(zip([a.shape for a in inputs], labels)), out).sizes(node)
        arrays = []
        for a, t in zip(inputs, labels):
            floating = a.dtype.kind == "f" or "float" in a.dtype.name  # ml_dtypes: bfloat16
            a = a.astype(np.float64) if floating else a
            arrays.append(np.broadcast_to(a, tuple(sizes[c] for c in t)))
        return [np.asarray(np.einsum(eq, *arrays)).astype(inputs[0].dtype)]

    def lower(self, node, inputs, outputs, values) -> Lowering:
        operands, out = self._plan(node, inputs)
        dtype = inputs[0].dtype
        low = Lowering()
        if len(operands) <= 2:
            plan = Contraction(operands, out)
            refs = [In(i) for i in range(len(operands))]
            low.launches.append(plan.launch(node, refs, Out(0), dtype))
            return low
        sizes = Contraction(operands, out).sizes(node)
        acc_ref, acc = In(0), operands[0]
        for i in range(1, len(operands)):
            later = set(out).union(*(lb for _, lb in operands[i + 1:]))
            if i == len(operands) - 1:
                keep, target = out, Out(0)
            else:
                both = acc[1] + operands[i][1]
                keep = "".join(dict.fromkeys(c for c in both if c in later))
                target = low.temp(dtype, [sizes[c] for c in keep])
            plan = Contraction([acc, operands[i]], keep)
            low.launches.append(plan.launch(node, [acc_ref, In(i)], target, dtype))
            acc_ref, acc = target, (tuple(sizes[c] for c in keep), keep)
        return low

    def cases(self) -> list[OpCase]:
        rng = np.random.default_rng(0)

        def r(*s: int) -> np.ndarray:
            return rng.standard_normal(s).astype(np.float32)

        def eq(name: str, equation: str, *xs: np.ndarray) -> OpCase:
            return OpCase(name, list(xs), {"equation": equation})

        return [
            eq("batch_matmul", "bij,bjk->bik", r(2, 3, 4), r(2, 4, 5)),
            eq("transpose", "ij->ji", r(3, 4)),
            eq("outer", "i,j->ij", r(3), r(4)),
            eq("sum_all", "ij->", r(3, 4)),
            eq("row_sum_implicit", "ij", r(3, 4)),
            eq("inner", "i,i", r(5), r(5)),
            eq("diagonal", "ii->i", r(4, 4)),
            eq("batch_diagonal", "...ii->...i", r(2, 3, 3)),
            eq("ellipsis_broadcast", "...ij,...jk->...ik", r(2, 1, 3, 4), r(3, 4, 2)),
            eq("attention_scores", "bhqd,bhkd->bhqk", r(1, 2, 3, 4), r(1, 2, 5, 4)),
            eq("three_operands", "ij,jk,kl->il", r(2, 3), r(3, 4), r(4, 2)),
            eq("size1", "ij,jk->ik", r(1, 1), r(1, 1)),
            OpCase("int64", [rng.integers(-4, 5, (3, 4)).astype(np.int64),
                             rng.integers(-4, 5, (4,)).astype(np.int64)], {"equation": "ij,j->i"}),
        ]
