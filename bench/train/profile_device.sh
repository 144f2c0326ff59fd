#!/usr/bin/env bash
# Issue 12's device run, one call: build what it needs, the step profile's GPU
# tests (test_cuda_profile: the profiler's attribution, every launch timed,
# LOCKSTEP_CUDA_PROFILE, the pool's peak, a units step that waits once and
# allocates nothing), then perf_table.py with a step profile per lockstep row.
#   bash bench/train/profile_device.sh                 (on the device machine)
# Environment: OUT (where the logs and profile_<mode>.json go; default
# /tmp/lockstep_profile), STEPS (timed steps, default 3), MODES (lockstep rows,
# default float,unit-bwd,unit-bwd-head), TORCH_MODES (default bf16; "" for none),
# BUILD (default build/gpu).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/lockstep_profile}
b=${BUILD:-build/gpu}
mkdir -p "$out"
if [ -d third_party/pcre2 ]; then source scripts/device_prepare.sh --on-device; fi
t0=$(date +%s)
cmake -S . -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON >"$out/cmake.log" 2>&1 ||
  { tail -30 "$out/cmake.log"; exit 1; }
cmake --build "$b" -j "$(nproc)" --target train_bench test_cuda_profile >"$out/build.log" 2>&1 ||
  { grep -E "error|FAILED" -A5 "$out/build.log" | head -60; exit 1; }
echo "built in $(( $(date +%s) - t0 )) s"
# One process: the start-up gates run once for all its tests.
set +e
"$b/tests/cuda/test_cuda_profile" >"$out/test_cuda_profile.log" 2>&1
rc=$?
set -e
grep -E "^\[ *(OK|FAILED|PASSED) |copy of 1 GiB|cudaMalloc calls|Failure|Expected|Which is" "$out/test_cuda_profile.log" | head -40 || true
echo "test_cuda_profile: exit $rc ($(( $(date +%s) - t0 )) s so far)"
python3 bench/train/perf_table.py --bench "$b/bench/train/train_bench" --device cuda --steps "${STEPS:-3}" \
  --modes "${MODES:-float,unit-bwd,unit-bwd-head}" --torch-modes "${TORCH_MODES-bf16}" --bf16-tflops 886 \
  --profile "$out" --log "$out/perf_table.log"
echo "done in $(( $(date +%s) - t0 )) s; logs and profile_<mode>.json in $out"
exit $rc
