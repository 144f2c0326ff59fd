#!/bin/bash
# session 8, attention v5 (docs/perf/ATTENTION_CUDA.md, "v5"): build test_cuda_attention, run it whole (gates
# clean + dirty, the drop-scale mutant, the GPT-2 shape on both forward tiles and both dk/dv loops), then the
# GPT-2 test alone (timing), then ncu's per-kernel times of the GPT-2 test's 11 warm-up launches. Run from the
# repository root on the device with third_party carried (`bash scripts/device_prepare.sh` here first):
#   bash scripts/device/session8_attn.sh
# ~60 s build (-j 16) + ~60 s gates + ~20 s timing + ~60 s ncu. Logs under /tmp/logs, tarred into $OUT.
source scripts/device_prepare.sh --on-device; set +eu
L=/tmp/logs; mkdir -p $L; T0=$(date +%s)
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON > $L/cfg.log 2>&1
cmake --build /tmp/b -j 16 --target test_cuda_attention > $L/build.log 2>&1 ||
  { grep -E "error|FAILED" -A5 $L/build.log | head -60; tar czf $OUT/logs.tgz -C /tmp logs; exit 1; }
echo "built at $(( $(date +%s) - T0 )) s" | tee -a $L/summary
timeout 240 /tmp/b/tests/cuda/test_cuda_attention > $L/attention.log 2>&1
echo "test_cuda_attention exit $? at $(( $(date +%s) - T0 )) s" >> $L/summary
timeout 90 /tmp/b/tests/cuda/test_cuda_attention --gtest_filter='*Gpt2*' > $L/gpt2.log 2>&1
echo "gpt2 alone exit $? at $(( $(date +%s) - T0 )) s" >> $L/summary
if command -v ncu > /dev/null; then
  timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum -k regex:'dkdv|dq_|fwd_tiled|delta' \
    --launch-count 11 /tmp/b/tests/cuda/test_cuda_attention --gtest_filter='*Gpt2*' > $L/ncu.log 2>&1
  echo "ncu exit $? at $(( $(date +%s) - T0 )) s" >> $L/summary
fi
cat $L/summary
grep -E "attention gates|passed|failed|mutant|^FAIL" $L/attention.log | head -20
grep -E "fwd|bwd|GPT-2|Failure|Which is|PASSED|FAILED" $L/gpt2.log | head -20
grep -E "fwd_tiled|dkdv|dq_|delta|gpu__time_duration" $L/ncu.log | sed -E 's/\(lockstep::cuda::launch::[^)]*\)//' | head -30
tar czf $OUT/logs.tgz -C /tmp logs
