#!/bin/bash
# What session 9 built without a GPU (no device time was left), to run first in the next session,
# after or together with scripts/device/next_call.sh (session 8's owed checks). ~8 min of device time.
#  1. ternary_gemv v2 (LOCKSTEP_TERNARY_GEMV=v2|v2pdl; default v1): the kernel tests (v1, v2, v2pdl, their
#     mutants), the whole-model decode bits with v2 and v2pdl, then decode_bench v1 / v2 / v2pdl
#     (predicted at batch 1: v1 ~374 tok/s, v2 ~430, v2pdl ~455; docs/perf/DECODE_CUDA.md §10).
#  2. the CUDA decode with LoRA adapters (s9-adapterdecode): test_infer_decode_lora_gpu (6 tests: CUDA
#     prefill, chunks, token by token, 8 sequences, next_logits = the CPU's bits) and
#     test_load_adapter_cli_cuda (the CLI's cuda text = cpu text). If both pass, remove the refusal in
#     load/adapted_model.cpp (LOCKSTEP_CUDA_ADAPTER_DECODE) and its test line in tests/load/adapter_test.cpp.
#  3. the engine headers changed by s9-requant (TERNARY2 weights in the transformer): test_cuda_lora,
#     test_tensor_param_gpu, test_cuda_model should pass unchanged.
source scripts/device_prepare.sh --on-device; set +eu
L=/tmp/logs_s9; rm -rf $L; mkdir -p $L; T0=$(date +%s)
stamp() { echo "$1 at $(( $(date +%s) - T0 )) s" >> $L/summary; }
( sleep ${WATCHDOG:-560}; stamp WATCHDOG; pkill -f /tmp/b/ ) &
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON > $L/cfg.log 2>&1
cmake --build /tmp/b -j 16 --target test_infer_decode_kernels_gpu test_infer_decode_gpu test_infer_decode_graphs_gpu \
  test_infer_decode_lora_gpu test_load_adapter_cli_cuda test_cuda_lora test_tensor_param_gpu test_cuda_model \
  decode_bench lockstep_cli > $L/build.log 2>&1 || grep -E "error|FAILED" -A5 $L/build.log | head -40
stamp built
run() { local name=$1; shift; timeout 240 taskset -c ${CORES:-0-1} "$@" > $L/$name.log 2>&1; stamp "$name exit $?"; }
D=/tmp/b/tests/infer
run kernels $D/test_infer_decode_kernels_gpu --gtest_filter='DecodeKernelsGpu.*Ternary*:DecodeKernelsGpu.PlantedBugsAreCaught' &
CORES=2-3 LOCKSTEP_TERNARY_GEMV=v2 run decode_v2 $D/test_infer_decode_gpu --gtest_filter=-*TheFusedDecodeKernelsChangeNoBit* &
CORES=4-5 LOCKSTEP_TERNARY_GEMV=v2pdl run decode_v2pdl $D/test_infer_decode_gpu --gtest_filter=-*TheFusedDecodeKernelsChangeNoBit* &
CORES=6-7 LOCKSTEP_TERNARY_GEMV=v2 run graphs_v2 $D/test_infer_decode_graphs_gpu &
CORES=8-9 run decode_lora $D/test_infer_decode_lora_gpu &
CORES=10-11 run adapter_cli_cuda /tmp/b/tests/load/test_load_adapter_cli_cuda &
CORES=12-13 run cuda_lora /tmp/b/tests/cuda/test_cuda_lora &
CORES=14-15 run tensor_param /tmp/b/tests/tensor/test_tensor_param_gpu &
wait
run cuda_model /tmp/b/tests/cuda/test_cuda_model
for v in v1 v2 v2pdl; do
  LOCKSTEP_TERNARY_GEMV=$v run bench_$v /tmp/b/bench/infer/decode_bench --device cuda --preset bitnet-b1.58-2b --ctx 512 \
    --batch 1,8,32 --prompt 32 --tokens 64
done
cat $L/summary; grep -hE "^\[  (PASSED|FAILED)|planted" $L/*.log | sort | uniq -c | head -40
grep -hE "tok/s|bound" $L/bench_*.log | head -30
tar czf $OUT/logs.tgz -C /tmp logs_s9
