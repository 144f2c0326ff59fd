#!/usr/bin/env bash
# Builds lockstep with CUDA and runs the tests labelled `gpu` (on the device
# machine: no package registry there, so nothing is installed; the build needs
# only what that machine has, see docs/ARCHITECTURE.md).
#   scripts/test_gpu.sh [ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON >/dev/null
cmake --build build/gpu -j "$(nproc)"
ctest --test-dir build/gpu -L gpu --output-on-failure "$@"
