#!/bin/bash
# The GPU checks of s10-decodeattn (cached attention v2, docs/perf/DECODE_CUDA.md §12), ~6 min of device time:
#  1. test_infer_decode_kernels_gpu's attention tests: v1, v2, v2pdl = ops::CachedAttention::forward (2B4T at ctx
#     512, batch 1 / 8 / 32 among the cases), the scale mutant in each, v2's two mutants caught (v2 and v2pdl);
#  2. the whole-model decode bits with v2 (the default) and with v1 (LOCKSTEP_DECODE_ATTENTION=v1), and the
#     graphs with v2;
#  3. decode_bench v1 / v2 / v2pdl at ctx 512 (the usual 32 + 64 tokens: rows of 33–96 keys) and with a 448-token
#     prompt (rows of 449–512 keys, §12's "512 keys" rows); the step profile of one v2 run.
# If 1 or 2 fails under v2: LOCKSTEP_DECODE_ATTENTION=v1 switches it off without a rebuild, and
# kDefaultDecodeAttention (backend/cuda/decode_launch.hpp) = 1 makes v1 the default again.
source scripts/device_prepare.sh --on-device; set +eu
L=/tmp/logs_s10a; rm -rf $L; mkdir -p $L; T0=$(date +%s)
stamp() { echo "$1 at $(( $(date +%s) - T0 )) s" >> $L/summary; }
( sleep ${WATCHDOG:-560}; stamp WATCHDOG; pkill -f /tmp/b/ ) &
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON > $L/cfg.log 2>&1
cmake --build /tmp/b -j 16 --target test_infer_decode_kernels_gpu test_infer_decode_gpu test_infer_decode_graphs_gpu \
  decode_bench > $L/build.log 2>&1 || grep -E "error|FAILED" -A5 $L/build.log | head -40
stamp built
run() { local name=$1; shift; timeout 240 taskset -c ${CORES:-0-1} "$@" > $L/$name.log 2>&1; stamp "$name exit $?"; }
D=/tmp/b/tests/infer
run kernels $D/test_infer_decode_kernels_gpu --gtest_filter='DecodeKernelsGpu.CachedAttention*' &
CORES=2-3 run decode_v2 $D/test_infer_decode_gpu &
CORES=4-5 LOCKSTEP_DECODE_ATTENTION=v1 run decode_v1 $D/test_infer_decode_gpu &
CORES=6-7 run graphs_v2 $D/test_infer_decode_graphs_gpu &
wait
B=/tmp/b/bench/infer/decode_bench
for v in v1 v2 v2pdl; do
  LOCKSTEP_DECODE_ATTENTION=$v run bench_$v $B --device cuda --preset bitnet-b1.58-2b --ctx 512 --batch 1,8,32 \
    --prompt 32 --tokens 64
  LOCKSTEP_DECODE_ATTENTION=$v run bench_long_$v $B --device cuda --preset bitnet-b1.58-2b --ctx 512 --batch 1,8,32 \
    --prompt 448 --tokens 64
done
LOCKSTEP_CUDA_GRAPHS=0 run profile_v2 $B --device cuda --preset bitnet-b1.58-2b --ctx 512 --batch 1 --prompt 32 \
  --tokens 32 --profile 4
cat $L/summary; grep -hE "^\[  (PASSED|FAILED)|planted" $L/*.log | sort | uniq -c | head -40
grep -hE "tok/s|bound|cached_attention" $L/bench_*.log $L/profile_v2.log | head -40
tar czf $OUT/logs.tgz -C /tmp logs_s10a
