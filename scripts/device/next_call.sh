#!/bin/bash
# What session 11 left owed on the GPU, to run first in session 12 (~8 min of wall after the start-up; bash
# scripts/device_prepare.sh here first; carry ["third_party", "data/janeaustenr"]). Session 11's last build on the
# device failed to link these binaries (pdl.cpp, now pdl.cu), so none of them has run with session 11's code:
#  1. test_infer_decode_kernels_gpu whole: the norm prologue, head v2/v2wide, attention v3 and the PDL kernels
#     against the spec at the 2B4T shapes, with their planted bugs on the device;
#  2. test_cuda_col_quant (LOCKSTEP_COL_CODES=v2's gate run, TimeAtGpt2Shapes) and test_cuda_gate_mutants'
#     column-quantizer mutants (~55 s each: 7 of them, its own stream), test_load_adapter_cli_cuda (300 s);
#  3. alone: the units step without and with LOCKSTEP_COL_CODES=v2 (issue 12's owed pair).
# Then, before any kernel work on the decode: where the 2.3 ms batch-1 pass goes if not to its kernels
# (docs/perf/DECODE_CUDA.md §19: the host's walk of a replayed pass against the graph's device time).
source scripts/device_prepare.sh --on-device; set +eu
L=/tmp/s12logs; rm -rf $L; mkdir -p $L; BUDGET_S=${BUDGET_S:-560} source scripts/device/deadline.sh
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON > $L/cfg.log 2>&1
timeout $(left 240) cmake --build /tmp/b -j 16 --target test_infer_decode_kernels_gpu test_cuda_col_quant \
  test_cuda_gate_mutants test_load_adapter_cli_cuda lockstep_cli train_bench > $L/build.log 2>&1 \
  || grep -E "error|FAILED" -A5 $L/build.log | head -40 > $L/build_errors.log
stamp built
D=/tmp/b/tests
( CORES=0-3 run kernels 200 $D/infer/test_infer_decode_kernels_gpu ) &
( CORES=4-7 run col_quant 120 $D/cuda/test_cuda_col_quant ) &
( CORES=8-11 run gate_mutants 300 $D/cuda/test_cuda_gate_mutants --gtest_filter='*col_quant*:CudaGateMutants.ListCoversTheEnum' ) &
( CORES=12-15 run adapter_cli 300 $D/load/test_load_adapter_cli_cuda ) &
wait
tar czf $OUT/logs.tgz -C /tmp s12logs
T=/tmp/b/bench/train/train_bench; A="gpt2-124m:16:1024:50304 --device cuda --linear units --unit-backward --units-head --steps 3"
CORES=0-7 run units_step 70 $T $A
CORES=0-7 LOCKSTEP_COL_CODES=v2 run units_step_codes2 70 $T $A
tar czf $OUT/logs.tgz -C /tmp s12logs
grep -hE "^\[  (PASSED|FAILED)|^\[  FAILED|planted|Skipped|us \(|tok/s" $L/*.log | sort | uniq -c | head -60 > $OUT/passes
cat $OUT/summary $OUT/passes
