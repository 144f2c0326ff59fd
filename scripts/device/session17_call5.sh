#!/bin/bash
# Session 17, call 5 (bash scripts/device_prepare.sh here first; carry ["third_party"]): copy_to_host through a
# page-locked stage (LOCKSTEP_PINNED_READBACK, default on): the decode tests and the training model's GPU = CPU
# hashes under it, then alone the benchmark with and without it (bench key pinned=0) in one process, batch 1, 8.
source scripts/device_prepare.sh --on-device; set +eu
L=/tmp/s17c5; rm -rf $L; mkdir -p $L; BUDGET_S=${BUDGET_S:-330} source scripts/device/deadline.sh
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON > $L/cfg.log 2>&1
timeout $(left 200) cmake --build /tmp/b -j 16 --target decode_bench test_infer_decode_gpu test_cuda_model \
  > $L/build.log 2>&1 || grep -E "error|FAILED" -A5 $L/build.log | head -40 > $OUT/build_errors.log
stamp built
( CORES=0-7 run decode 120 /tmp/b/tests/infer/test_infer_decode_gpu ) &
( CORES=8-15 run model 120 /tmp/b/tests/cuda/test_cuda_model ) &
wait
B=/tmp/b/bench/infer/decode_bench; P="--device cuda --preset bitnet-b1.58-2b --ctx 512"
CORES=0-7 run bench 90 $B $P --batch 1,8 --prompt 32 --tokens 64 --variants "new;pageable:pinned=0;new2;pageable2:pinned=0"
tar czf $OUT/logs.tgz -C /tmp s17c5
grep -hE "^\[  (PASSED|FAILED)|^\[  FAILED" $L/decode.log $L/model.log | sort | uniq -c | sort -rn > $OUT/passes
grep -hE "^variant|^ +(1|8) |a replayed pass" $L/bench.log > $OUT/bench_table
cat $OUT/summary $OUT/passes $OUT/bench_table
