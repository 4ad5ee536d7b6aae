#!/usr/bin/env bash
# example_plugin_venv.sh VENV PACKAGE: a venv at VENV layered over .venv (it sees every
# package installed there) with the example plugin at PACKAGE installed (editable) into it
# alone, so the plugin never shows up in the main environment's registries.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$1
rm -rf "$venv"
.venv/bin/python -m venv --without-pip "$venv"
base=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "import site; site.addsitedir('$base')" > "$site/spawnml-dev-venv.pth"
.venv/bin/python -m pip --quiet --python "$venv/bin/python" install --no-deps \
  --no-build-isolation -e "$2"
