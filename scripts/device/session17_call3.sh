#!/bin/bash
# Session 17, call 3 (bash scripts/device_prepare.sh here first; carry ["third_party"]): early launch and PDL are
# now the defaults (call 1 and 2 measured them fastest), and decode_bench's greedy pick is infer::argmax in lanes
# (the serial max_element took ~0.2 ms of a ~2 ms pass on the host). Checks under the new defaults: the whole-model
# decode tests and the graph tests on the device (the CPU's bits; PDL's and early launch's planted bugs), the
# training model's GPU = CPU weight hashes (residual_fwd and relu2mul_fwd now launch programmatically in a step
# too); then the benchmark alone: the defaults against the old ones (early=0,pdl=0) in one process, batch 1, 8, 32.
source scripts/device_prepare.sh --on-device; set +eu
L=/tmp/s17c3; rm -rf $L; mkdir -p $L; BUDGET_S=${BUDGET_S:-460} source scripts/device/deadline.sh
TARGETS="decode_bench test_infer_decode_gpu test_infer_decode_graphs_gpu test_cuda_model"
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON > $L/cfg.log 2>&1
timeout $(left 200) cmake --build /tmp/b -j 16 --target $TARGETS > $L/build.log 2>&1 \
  || grep -E "error|FAILED" -A5 $L/build.log | head -40 > $OUT/build_errors.log
stamp built
( CORES=0-5 run decode 170 /tmp/b/tests/infer/test_infer_decode_gpu ) &
( CORES=6-10 run graphs 120 /tmp/b/tests/infer/test_infer_decode_graphs_gpu ) &
( CORES=11-15 run model 170 /tmp/b/tests/cuda/test_cuda_model ) &
wait
B=/tmp/b/bench/infer/decode_bench; P="--device cuda --preset bitnet-b1.58-2b --ctx 512"
CORES=0-7 run bench 110 $B $P --batch 1,8,32 --prompt 32 --tokens 64 --variants "new;old:early=0,pdl=0;new2"
tar czf $OUT/logs.tgz -C /tmp s17c3
grep -hE "^\[  (PASSED|FAILED)|^\[  FAILED|planted|SKIPPED \]" $L/decode.log $L/graphs.log $L/model.log | sort | uniq -c \
  | sort -rn | head -40 > $OUT/passes
grep -hE "^variant|^ +(1|8|32) |a replayed pass|first decode pass" $L/bench.log > $OUT/bench_table
cat $OUT/summary $OUT/passes $OUT/bench_table
