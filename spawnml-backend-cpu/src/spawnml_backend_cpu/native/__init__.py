"""The cpu backend's native executor: kernel IR printed as LLVM IR (``llvm_ir``), compiled
for the host CPU by llvmlite and run on a shared thread pool (``jit``)."""
