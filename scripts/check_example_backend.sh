#!/usr/bin/env bash
# The example third-party backend (conformance/examples/) installed the way a plugin author
# installs theirs, into its own venv layered over .venv (so `example` never shows up in the
# main environment's backend lists), then its inherited standard tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/example_plugin_venv.sh build/example-venv conformance/examples/spawnml-backend-example
build/example-venv/bin/python -m pytest -q -p no:cacheprovider \
  conformance/examples/spawnml-backend-example/tests
