#!/usr/bin/env bash
# One build-test-measure cycle on the GPU machine (the device tool runs it in
# the repository root; results go to $OUT). The machine has no package
# registry: xxhash.h travels in third_party/xxhash/ (copy it there first:
#   mkdir -p third_party/xxhash && cp /usr/include/xxhash.h third_party/xxhash/
# and name third_party in the device call's carry list).
#   scripts/device_check.sh [--ulp]     --ulp: also the exhaustive ulp measurement
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/lockstep-device}
mkdir -p "$OUT"
{
  echo "== machine =="; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nproc; g++ --version | head -1; nvcc --version | tail -1; cmake --version | head -1
} 2>&1 | tee "$OUT/machine.txt"

echo "== build (CUDA on) =="
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON \
  >"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
cmake --build build/gpu -j "$(nproc)" >"$OUT/build.log" 2>&1 || { grep -E "error|Error" -A3 "$OUT/build.log" | head -60; exit 1; }

echo "== gpu tests =="
ctest --test-dir build/gpu -L gpu --output-on-failure -V 2>&1 | tee "$OUT/gpu_tests.log" | grep -E "cuda|Passed|Failed|tests passed|mismatches"

echo "== cpu tests on this machine (other CPU, other compiler) =="
ctest --test-dir build/gpu -LE "gpu|slow" -j "$(nproc)" --output-on-failure 2>&1 | tee "$OUT/cpu_tests.log" | tail -5

echo "== lockstep verify =="
./build/gpu/lockstep verify --seed 1 2>&1 | tee "$OUT/verify.log" | tail -60

if [ "${1:-}" = "--ulp" ] && [ -x build/gpu/bench/ulp/ulp_exhaustive ]; then
  echo "== exhaustive ulp (double libm reference) =="
  ./build/gpu/bench/ulp/ulp_exhaustive 2>&1 | tee "$OUT/ulp_exhaustive.txt" | tail -30
fi
