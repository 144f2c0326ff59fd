#!/bin/bash
# Session 14, call 1: where a replayed batch-1 decode pass goes (the graph's device time by events against
# the host walk before its launch, docs/perf/DECODE_CUDA.md §20) and the early launch of the replay
# (LOCKSTEP_DECODE_GRAPH_EARLY). bash scripts/device_prepare.sh here first; carry ["third_party"].
#  1. build (-j 16) the decode GPU tests and decode_bench;
#  2. the graph tests whole (the early-launch test and its planted bug among them) beside the whole-model
#     decode tests under LOCKSTEP_DECODE_GRAPH_EARLY=1 (every test, mutants included, with early replays);
#  3. alone: decode_bench, every variant in one process; then graph_node_bench (a graph's per-kernel floor).
source scripts/device_prepare.sh --on-device; set +eu
L=/tmp/s14logs; rm -rf $L; mkdir -p $L; BUDGET_S=${BUDGET_S:-560} source scripts/device/deadline.sh
TARGETS="test_infer_decode_gpu test_infer_decode_graphs_gpu decode_bench graph_node_bench"
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON > $L/cfg.log 2>&1
timeout $(left 260) cmake --build /tmp/b -j 16 --target $TARGETS > $L/build.log 2>&1 \
  || grep -E "error|FAILED" -A5 $L/build.log | head -40 > $OUT/build_errors.log
stamp built
D=/tmp/b/tests
( CORES=0-5 run graphs 120 $D/infer/test_infer_decode_graphs_gpu ) &
( CORES=6-13 LOCKSTEP_DECODE_GRAPH_EARLY=1 run decode_early 200 $D/infer/test_infer_decode_gpu ) &
wait
tar czf $OUT/logs.tgz -C /tmp s14logs
V="base;early:early=1;all:normgemv=1,pdl=1,attention=v3;early_all:early=1,normgemv=1,pdl=1,attention=v3"
V="$V;early_norm:early=1,normgemv=1;early_attn3:early=1,attention=v3;early_pdl:early=1,pdl=1"
CORES=0-7 run bench 200 /tmp/b/bench/infer/decode_bench --device cuda --preset bitnet-b1.58-2b --ctx 512 \
  --batch 1,8,32 --prompt 32 --tokens 64 --variants "$V"
CORES=0-3 run nodes 30 /tmp/b/bench/cuda/graph_node_bench
tar czf $OUT/logs.tgz -C /tmp s14logs
grep -hE "^\[  (PASSED|FAILED)|^\[  FAILED|planted|early launch|Skipped" $L/*.log | sort | uniq -c | sort -rn | head -50 > $OUT/passes
grep -hE "^variant|^ +(1|8|32) |a replayed pass|copy bandwidth" $L/bench.log > $OUT/bench_table
cat $OUT/summary $OUT/passes $OUT/bench_table $L/nodes.log
