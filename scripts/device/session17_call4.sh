#!/bin/bash
# Session 17, call 4 (bash scripts/device_prepare.sh here first; carry ["third_party"]): attention v3 is now auto's
# small-batch kernel (batch 1-6 at 20 query heads), argmax in vector lanes. The whole-model decode tests on the
# device under the defaults (v3 at batch 1 with PDL and early launch: the CPU's bits), then alone the benchmark:
# the defaults against v2 at batch 1 (attention=v2) in one process, batch 1, 8, 32.
source scripts/device_prepare.sh --on-device; set +eu
L=/tmp/s17c4; rm -rf $L; mkdir -p $L; BUDGET_S=${BUDGET_S:-400} source scripts/device/deadline.sh
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON > $L/cfg.log 2>&1
timeout $(left 200) cmake --build /tmp/b -j 16 --target decode_bench test_infer_decode_gpu test_infer_decode_graphs_gpu \
  > $L/build.log 2>&1 || grep -E "error|FAILED" -A5 $L/build.log | head -40 > $OUT/build_errors.log
stamp built
( CORES=0-7 run decode 170 /tmp/b/tests/infer/test_infer_decode_gpu ) &
( CORES=8-15 run graphs 120 /tmp/b/tests/infer/test_infer_decode_graphs_gpu ) &
wait
B=/tmp/b/bench/infer/decode_bench; P="--device cuda --preset bitnet-b1.58-2b --ctx 512"
CORES=0-7 run bench 100 $B $P --batch 1,8,32 --prompt 32 --tokens 64 --variants "new;v2:attention=v2;new2"
tar czf $OUT/logs.tgz -C /tmp s17c4
grep -hE "^\[  (PASSED|FAILED)|^\[  FAILED|attention version" $L/decode.log $L/graphs.log | sort | uniq -c | sort -rn \
  | head -30 > $OUT/passes
grep -hE "^variant|^ +(1|8|32) |a replayed pass|first decode pass" $L/bench.log > $OUT/bench_table
cat $OUT/summary $OUT/passes $OUT/bench_table
