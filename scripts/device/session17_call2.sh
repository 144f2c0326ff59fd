#!/bin/bash
# Session 17, call 2 (bash scripts/device_prepare.sh here first; carry ["third_party"]):
#  1. owed since session 11 (their binaries did not link then): test_infer_decode_kernels_gpu whole (every decode
#     kernel against the spec at the 2B4T shapes, planted bugs on the device) and test_cuda_col_quant (the gate run
#     under LOCKSTEP_COL_CODES=v2), side by side (so TimeAtGpt2Shapes' figures read contended);
#  2. alone: decode_bench's variants on top of early launch + PDL (call 1: the fastest pair): the norm prologue,
#     attention v3, head v2wide, all three; the first decode pass is now timed apart (the graph's capture);
#  3. ncu's device time per kernel of two batch-1 passes under early launch + PDL (docs/perf/DECODE_CUDA.md §21).
source scripts/device_prepare.sh --on-device; set +eu
L=/tmp/s17logs; rm -rf $L; mkdir -p $L; BUDGET_S=${BUDGET_S:-480} source scripts/device/deadline.sh
TARGETS="decode_bench test_infer_decode_kernels_gpu test_cuda_col_quant"
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON > $L/cfg.log 2>&1
timeout $(left 200) cmake --build /tmp/b -j 16 --target $TARGETS > $L/build.log 2>&1 \
  || grep -E "error|FAILED" -A5 $L/build.log | head -40 > $OUT/build_errors.log
stamp built
( CORES=0-7 run kernels 150 /tmp/b/tests/infer/test_infer_decode_kernels_gpu ) &
( CORES=8-15 run col_quant 120 /tmp/b/tests/cuda/test_cuda_col_quant ) &
wait
B=/tmp/b/bench/infer/decode_bench; P="--device cuda --preset bitnet-b1.58-2b --ctx 512"
V="ep:early=1,pdl=1;norm:early=1,pdl=1,normgemv=1;v3:early=1,pdl=1,attention=v3;wide:early=1,pdl=1,head=v2wide"
V="$V;all:early=1,pdl=1,normgemv=1,attention=v3,head=v2wide;ep2:early=1,pdl=1"
CORES=0-7 run bench 120 $B $P --batch 1,8 --prompt 32 --tokens 64 --variants "$V"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
CORES=0-7 LOCKSTEP_DECODE_GRAPH_EARLY=1 LOCKSTEP_DECODE_PDL=1 run ncu 100 $NCU --profile-from-start off \
  --clock-control none --metrics gpu__time_duration.sum --csv --log-file $L/ncu.csv $B $P --batch 1 --prompt 32 \
  --tokens 8 --capture 2
python3 scripts/device/ncu_summary.py $L/ncu.csv 2 > $OUT/ncu_summary.txt 2>&1
tar czf $OUT/logs.tgz -C /tmp s17logs
grep -hE "^\[  (PASSED|FAILED)|^\[  FAILED|planted|Skipped|SKIPPED" $L/kernels.log $L/col_quant.log | sort | uniq -c \
  | sort -rn | head -50 > $OUT/passes
grep -hE "^variant|^ +(1|8) |a replayed pass|first decode pass" $L/bench.log > $OUT/bench_table
cat $OUT/summary $OUT/passes $OUT/bench_table; head -30 $OUT/ncu_summary.txt
