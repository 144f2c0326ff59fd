#!/bin/bash
# Session 11, call 2: the merged helpers' GPU tests and the decode variants side by side (~8 min of wall
# after the start-up; bash scripts/device_prepare.sh here first; carry ["third_party", "data/janeaustenr"]).
#  1. build (-j 16) the decode GPU tests, the column quantizer's, decode_bench and train_bench;
#  2. the tests in four streams, each pinned to 4 host cores: the decode tests whole (every new kernel against
#     the spec, its planted bugs, the whole-model decode under each switch), again whole under
#     LOCKSTEP_DECODE_PDL=1, the graphs, the column quantizer and the new gate mutant;
#  3. alone: decode_bench once, every variant in the one process (one start-up, one model);
#  4. if time is left: the units step without and with LOCKSTEP_COL_CODES=v2.
source scripts/device_prepare.sh --on-device; set +eu
L=/tmp/s11logs; rm -rf $L; mkdir -p $L; BUDGET_S=${BUDGET_S:-585} source scripts/device/deadline.sh
TARGETS="test_infer_decode_kernels_gpu test_infer_decode_gpu test_infer_decode_graphs_gpu test_cuda_col_quant
  test_cuda_gate_mutants decode_bench train_bench"
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON > $L/cfg.log 2>&1
timeout $(left 240) cmake --build /tmp/b -j 16 --target $TARGETS > $L/build.log 2>&1 \
  || grep -E "error|FAILED" -A5 $L/build.log | head -40 > $L/build_errors.log
stamp built
D=/tmp/b/tests
( CORES=0-3 run decode 220 $D/infer/test_infer_decode_gpu ) &
( CORES=4-7 LOCKSTEP_DECODE_PDL=1 run decode_pdl 220 $D/infer/test_infer_decode_gpu ) &
( CORES=8-11 run kernels 130 $D/infer/test_infer_decode_kernels_gpu; CORES=8-11 run graphs 80 $D/infer/test_infer_decode_graphs_gpu ) &
( CORES=12-15 run col_quant 90 $D/cuda/test_cuda_col_quant
  CORES=12-15 run gate_mutants 70 $D/cuda/test_cuda_gate_mutants --gtest_filter='*col_quant_codes*:CudaGateMutants.ListCoversTheEnum'
  CORES=12-15 LOCKSTEP_DECODE_PDL=1 run graphs_pdl 60 $D/infer/test_infer_decode_graphs_gpu ) &
wait
tar czf $OUT/logs.tgz -C /tmp s11logs
V="base;pdl:pdl=1;norm:normgemv=1;norm_pdl:normgemv=1,pdl=1;head2:head=v2;head2w:head=v2wide;attn3:attention=v3"
V="$V;all:normgemv=1,pdl=1,head=v2,attention=v3;all_auto:normgemv=1,pdl=1,head=v2"
CORES=0-7 run bench 150 /tmp/b/bench/infer/decode_bench --device cuda --preset bitnet-b1.58-2b --ctx 512 \
  --batch 1,8,32 --prompt 32 --tokens 64 --variants "$V"
tar czf $OUT/logs.tgz -C /tmp s11logs
# 4. what time is left: the units step with the session-10 steps-and-codes kernel and with LOCKSTEP_COL_CODES=v2
T=/tmp/b/bench/train/train_bench; A="gpt2-124m:16:1024:50304 --device cuda --linear units --unit-backward --units-head --steps 3"
CORES=0-7 run units_step 70 $T $A
CORES=0-7 LOCKSTEP_COL_CODES=v2 run units_step_codes2 70 $T $A
tar czf $OUT/logs.tgz -C /tmp s11logs
grep -hE "^\[  (PASSED|FAILED)|^\[  FAILED|planted|Skipped|programmatic" $L/*.log | sort | uniq -c | sort -rn | head -50 > $OUT/passes
grep -hE "^variant|^ +(1|8|32) " $L/bench.log > $OUT/bench_table
grep -hE "tok/s|ms" $L/units_step*.log | tail -6 >> $OUT/bench_table
cat $OUT/summary $OUT/passes $OUT/bench_table
