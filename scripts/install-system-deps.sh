#!/usr/bin/env bash
# Installs the Debian packages spawnml's backends need at run time on a machine without a
# GPU driver: Mesa EGL/llvmpipe (webgl), lavapipe Vulkan (webgpu), PoCL OpenCL (opencl), and
# chromium for the real-browser check of generated GLSL (spawnml-backend-webgl's
# tests/test_chromium.py, skipped without it). Each package is explained, with what a GPU
# driver replaces, at the top of spawnml-backend-webgl/, spawnml-backend-webgpu/ and
# spawnml-backend-opencl/README.md. cpu and wasm need none; cuda needs the NVIDIA driver,
# which this script does not install. Idempotent; prints nothing on success.
set -euo pipefail

PACKAGES=(
  libegl1 libegl-mesa0 libgl1-mesa-dri libgl1 libgles2  # EGL + Mesa llvmpipe: webgl
  mesa-vulkan-drivers libvulkan1                        # lavapipe software Vulkan: webgpu
  pocl-opencl-icd ocl-icd-libopencl1                    # PoCL CPU OpenCL: opencl
  chromium                                              # headless browser checks
)

die() {
  echo "install-system-deps: $*" >&2
  exit 1
}

if [ ! -f /etc/debian_version ] || ! command -v apt-get >/dev/null || ! command -v dpkg-query >/dev/null; then
  die "this script needs Debian or a derivative (apt-get, dpkg-query); elsewhere install the equivalents of: ${PACKAGES[*]}"
fi

missing=()
for package in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  die "must run as root to install ${missing[*]} (try: sudo $0)"
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -q && apt-get install -y -q --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  die "apt-get failed to install: ${missing[*]}"
fi
