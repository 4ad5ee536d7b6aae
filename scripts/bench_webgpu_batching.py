"""WebGPU batching: 100 small kernels chained on the device vs. 100 submit-and-wait trips.

Chained: 100 launches recorded into one command encoder, submitted once, one read at the
end. Round trips: each launch submitted and waited for (``synchronize``) before the next,
which is what a runtime without batching pays. Prints both and their ratio.

    .venv/bin/python scripts/bench_webgpu_batching.py [--kernels 100] [--size 4096] [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from spawnml.kernel import Output, Tensor, kernel
from spawnml.probing import ensure_xdg_runtime_dir


@kernel
def affine(x: Tensor, out: Output):
    return x.flat[out.flat] * 0.5 + 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=100)
    parser.add_argument("--size", type=int, default=4096, help="elements per tensor")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    ensure_xdg_runtime_dir()
    from spawnml_backend_webgpu import WebGPUBackend

    backend = WebGPUBackend()
    x = np.ones(args.size, np.float32)
    program = backend.compile(affine.specialize([x], (x.shape, "float32")))
    a, b = backend.upload(x), backend.alloc(x.nbytes)

    def chained() -> None:
        src, dst = a, b
        for _ in range(args.kernels):
            backend.launch(program, dst, [src])
            src, dst = dst, src
        backend.download(src, x.shape, "float32")

    def round_trips() -> None:
        src, dst = a, b
        for _ in range(args.kernels):
            backend.launch(program, dst, [src])
            backend.synchronize()
            src, dst = dst, src
        backend.download(src, x.shape, "float32")

    def best(fn) -> float:
        fn()  # warm up
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return statistics.median(times)

    t_chain, t_trips = best(chained), best(round_trips)
    # Both orders end at the same value: the chain ran for real.
    got = backend.download(a if args.kernels % 2 == 0 else b, x.shape, "float32")
    assert np.all(np.isfinite(got))
    print(f"device: {backend.capabilities.extras['adapter']}")
    print(f"{args.kernels} kernels of {args.size} elements, median of {args.repeat}")
    print(f"chained, one submit and one read: {t_chain * 1e3:8.2f} ms")
    print(f"submit-and-wait per kernel:       {t_trips * 1e3:8.2f} ms")
    print(f"batching is {t_trips / t_chain:.1f}x faster")
    backend.free(a)
    backend.free(b)


if __name__ == "__main__":
    main()
