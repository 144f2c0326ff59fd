#!/bin/bash
# Session 15, call 1: the early-launch planted bug made to bite (it now reorders only a pass that replays:
# before, its capture pass began the capture ahead of the staging copy and was abandoned, so nothing
# replayed and 0 of 81 passes differed), and early launch against PDL and both, on their own, at batch 1
# and 8 (session 15's first call, on an H100: early 1.04x, early+pdl 1.10x base at batch 1).
# bash scripts/device_prepare.sh here first; carry ["third_party"].
source scripts/device_prepare.sh --on-device; set +eu
L=/tmp/s15logs; rm -rf $L; mkdir -p $L; BUDGET_S=${BUDGET_S:-330} source scripts/device/deadline.sh
TARGETS="test_infer_decode_graphs_gpu decode_bench"
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON > $L/cfg.log 2>&1
timeout $(left 200) cmake --build /tmp/b -j 16 --target $TARGETS > $L/build.log 2>&1 \
  || grep -E "error|FAILED" -A5 $L/build.log | head -40 > $OUT/build_errors.log
stamp built
CORES=0-7 run graphs 90 /tmp/b/tests/infer/test_infer_decode_graphs_gpu
V="base;early:early=1;pdl:pdl=1;early_pdl:early=1,pdl=1;base2"
CORES=0-7 run bench 150 /tmp/b/bench/infer/decode_bench --device cuda --preset bitnet-b1.58-2b --ctx 512 \
  --batch 1,8 --prompt 32 --tokens 64 --variants "$V"
tar czf $OUT/logs.tgz -C /tmp s15logs
grep -hE "^\[  (PASSED|FAILED)|planted|Skipped" $L/graphs.log | sort | uniq -c | sort -rn | head -40 > $OUT/passes
grep -hE "^variant|^ +(1|8) |a replayed pass" $L/bench.log > $OUT/bench_table
cat $OUT/summary $OUT/passes $OUT/bench_table
