#!/usr/bin/env bash
# spawnml-ray installed alone, as a user would: a fresh venv with core, the ops, one backend
# (cpu) and spawnml-ray, nothing else of the workspace. Checks that nothing else came along,
# that a SessionPredictor job on a local Ray cluster matches a plain InferenceSession, and
# that `spawnml batch` says what it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build/ray-venv
rm -rf "$venv"
"${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/python" -m pip --quiet install --upgrade pip
"$venv/bin/python" -m pip --quiet install "./spawnml-core[onnx]" ./spawnml-ops \
  ./spawnml-backend-cpu ./spawnml-ray
"$venv/bin/python" - <<'PY'
import importlib.util, subprocess, sys, tempfile
import numpy as np, onnx, ray, ray.data
from onnx import TensorProto, helper, numpy_helper
from spawnml import InferenceSession, list_backends
import spawnml_ray

extra = [m for m in ("spawnml_pipelines", "spawnml_backend_opencl", "spawnml_backend_webgpu",
                     "spawnml_backend_webgl", "spawnml_backend_wasm") if importlib.util.find_spec(m)]
assert not extra, f"installed along with spawnml-ray: {extra}"
assert [b.name for b in list_backends()] == ["cpu"], list_backends()
w = np.random.default_rng(0).standard_normal((8, 3)).astype(np.float32)
graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
                          [numpy_helper.from_array(w, "w")])
path = tempfile.mktemp(suffix=".onnx")
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
x = np.random.default_rng(1).standard_normal((20, 8)).astype(np.float32)
ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
ds = ray.data.from_numpy(x).map_batches(
    spawnml_ray.SessionPredictor, batch_size=5, num_cpus=1,
    fn_constructor_kwargs={"model": spawnml_ray.ship_model(path), "input_column": "data"},
    compute=ray.data.ActorPoolStrategy(size=2))
got = np.concatenate([b["y"] for b in ds.iter_batches(batch_size=None)])
ray.shutdown()
want = InferenceSession(path, ["cpu"]).run(None, {"x": x})[0]
np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
done = subprocess.run([sys.executable, "-m", "spawnml", "batch", "classify", "in", "out"],
                      capture_output=True, text=True)
assert done.returncode == 1 and "spawnml-ray[pipelines]" in done.stderr, done.stderr
print(f"spawnml-ray alone: ray {ray.__version__}, backends cpu; SessionPredictor on Ray "
      f"matches InferenceSession ({got.shape[0]} rows); `spawnml batch` asks for pipelines")
PY
