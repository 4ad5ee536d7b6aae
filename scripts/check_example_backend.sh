#!/usr/bin/env bash
# The example third-party backend (conformance/examples/) installed the way a plugin author
# installs theirs, into its own venv layered over .venv (so `example` never shows up in the
# main environment's backend lists), then its inherited standard tests.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build/example-venv
rm -rf "$venv"
.venv/bin/python -m venv --without-pip "$venv"
base=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "import site; site.addsitedir('$base')" > "$site/spawnml-dev-venv.pth"
.venv/bin/python -m pip --quiet --python "$venv/bin/python" install --no-deps \
  --no-build-isolation -e conformance/examples/spawnml-backend-example
"$venv/bin/python" -m pytest -q -p no:cacheprovider conformance/examples/spawnml-backend-example/tests
