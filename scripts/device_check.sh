#!/usr/bin/env bash
# One build-test-measure cycle on the GPU machine (the device tool runs it in
# the repository root; results go to $OUT). The machine has no package
# registry: xxhash.h travels in third_party/xxhash/ (copy it there first:
#   mkdir -p third_party/xxhash && cp /usr/include/xxhash.h third_party/xxhash/
# and name third_party in the device call's carry list).
#   scripts/device_check.sh [--quick] [--ulp]
#     --quick: build and the gpu tests only;  --ulp: also the exhaustive ulp measurement
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/lockstep-device}
mkdir -p "$OUT"
quick=0; ulp=0
for a in "$@"; do case "$a" in --quick) quick=1 ;; --ulp) ulp=1 ;; esac; done
{
  echo "== machine =="; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nproc; g++ --version | head -1; nvcc --version | tail -1; cmake --version | head -1
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
} 2>&1 | tee "$OUT/machine.txt"

echo "== build (CUDA on) =="
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON \
  >"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
cmake --build build/gpu -j "$(nproc)" >"$OUT/build.log" 2>&1 || { grep -E "error|Error" -A3 "$OUT/build.log" | head -60; exit 1; }

echo "== gpu tests =="
ctest --test-dir build/gpu -L gpu --output-on-failure -V 2>&1 | tee "$OUT/gpu_tests.log" \
  | grep -E "^\S+: (mutant|cuda|gpt2|llama|bitnet|audited|caught|cudaMalloc|cpu 12|attention|linear|gemm)|Passed|Failed|tests passed|FAILED"
[ "$quick" = 1 ] && exit 0

echo "== Hugging Face export (transformers on this machine) =="
ctest --test-dir build/gpu -R HfExport --output-on-failure -V 2>&1 | tee "$OUT/hf_tests.log" | grep -E "logits|Passed|Failed|Skipped"

echo "== benchmark: GPT-2 124M training step, lockstep CUDA vs PyTorch fp32 (TF32 off) =="
PYTHONUNBUFFERED=1 python3 bench/train/torch_reference.py --bench build/gpu/bench/train/train_bench --device cuda \
  --steps 5 gpt2-124m:16:1024:50257 2>&1 | tee "$OUT/bench_gpt2_124m.txt"
build/gpu/bench/train/train_bench gpt2-124m:16:1024:50257 --device cuda --steps 5 --json 2>&1 | tee -a "$OUT/bench_gpt2_124m.txt"

echo "== lockstep train --device cuda (the default run, on the GPU) =="
./build/gpu/lockstep train --device cuda --out /tmp/run_cuda --log-every 100 2>&1 | tee "$OUT/train_cuda.log" | tail -12

echo "== cpu tests on this machine (other CPU, other compiler) =="
ctest --test-dir build/gpu -LE "gpu|slow" -j "$(nproc)" --output-on-failure 2>&1 | tee "$OUT/cpu_tests.log" | tail -5

if [ "$ulp" = 1 ] && [ -x build/gpu/bench/ulp/ulp_exhaustive ]; then
  echo "== exhaustive ulp (double libm reference) =="
  ./build/gpu/bench/ulp/ulp_exhaustive 2>&1 | tee "$OUT/ulp_exhaustive.txt" | tail -30
fi
