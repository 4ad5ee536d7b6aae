"""Entry point of the cpu backend plugin."""

from spawnml import hookimpl

from .backend import CPUBackend


@hookimpl
def spawnml_register_backends(register):
    register(CPUBackend)


@hookimpl
def spawnml_register_kernels(register):
    # BLAS/numpy kernels for heavy float32 ops; each checks SPAWNML_CPU_FAST_KERNELS in
    # supports(), so tests can switch to the portable kernels without reloading plugins.
    from . import fast_kernels, fast_layout, fast_norms, fast_quant, fast_reference

    for kernel in [*fast_kernels.KERNELS, *fast_norms.KERNELS, *fast_layout.KERNELS,
                   *fast_reference.KERNELS, *fast_quant.KERNELS]:
        register(kernel)
