"""Several kernel modules' functions in one module (whole-plan modules, ``export-wasm``).

Each kernel module (``wat.WatKernel``) has polyfill helpers and a ``$run`` function. Linked,
kernel ``i``'s ``$run`` becomes ``$k{i}``; helpers printed identically by several kernels
(the same polyfill) are kept once; a helper name that two kernels print differently is
renamed in the second kernel, at its definition and its calls.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .wat import WatKernel


def _rename(text: str, old: str, new: str) -> str:
    return re.sub(rf"\${re.escape(old)}(?=[\s)])", f"${new}", text)


def link(kernels: Sequence[WatKernel]) -> list[str]:
    """The top-level function texts of ``kernels`` for one module: shared helpers first,
    then ``$k0``, ``$k1``, ... (kernel ``i``'s ``run(lo, hi, out, in0, ...)``)."""
    helpers: dict[str, str] = {}  # name -> text
    runs: list[str] = []
    for i, kernel in enumerate(kernels):
        texts = [*kernel.helpers, kernel.run.replace("  (func $run ", f"  (func $k{i} ", 1)]
        clashes = [
            name for name in map(WatKernel.helper_name, kernel.helpers)
            if name in helpers and helpers[name] not in kernel.helpers
        ]
        for name in clashes:  # the same name for another function: this kernel's is renamed
            texts = [_rename(t, name, f"{name}_k{i}") for t in texts]
        for text in texts[:-1]:
            helpers.setdefault(WatKernel.helper_name(text), text)
        runs.append(texts[-1])
    return [*helpers.values(), *runs]
