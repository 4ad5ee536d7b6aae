"""spawnml's ONNX operator set: shape rules, numpy references and portable kernels."""
