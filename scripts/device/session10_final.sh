#!/bin/bash
# Session 10's one device call after the helpers' merge (budget: ~6 min of wall after the start-up).
# The summary goes straight to $OUT and the logs as one tarball (only a few files come back from a call), every step has
# a timeout cut to what is left before DEADLINE, and nothing is started after it.
#   1. build only the targets below (-j 16);
#   2. the GPU tests in parallel streams, each pinned to its own host cores;
#   3. the benchmarks alone: decode (the session-10 defaults against the session-9 kernels) and the units step.
source scripts/device_prepare.sh --on-device; set +eu
L=/tmp/s10logs; rm -rf $L; mkdir -p $L; BUDGET_S=${BUDGET_S:-360} source scripts/device/deadline.sh
TARGETS="test_infer_decode_kernels_gpu test_infer_decode_gpu test_infer_decode_graphs_gpu test_cuda_col_quant
  test_cuda_gate_mutants test_cuda_units_model test_cuda_lora test_cuda_model test_load_adapter_cli_cuda lockstep_cli
  decode_bench train_bench lora_bench ${EXTRA_TARGETS:-}"
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON > $L/cfg.log 2>&1
timeout $(left 200) cmake --build /tmp/b -j 16 --target $TARGETS > $L/build.log 2>&1 \
  || grep -E "error|FAILED" -A5 $L/build.log | head -40 > $L/build_errors.log
stamp built
D=/tmp/b/tests
( CORES=0-3 run decode 120 $D/infer/test_infer_decode_gpu; CORES=0-3 run graphs 50 $D/infer/test_infer_decode_graphs_gpu ) &
( CORES=4-5 run kernels 80 $D/infer/test_infer_decode_kernels_gpu; CORES=4-5 run col_quant 50 $D/cuda/test_cuda_col_quant
  CORES=4-5 run gate_mutants 40 $D/cuda/test_cuda_gate_mutants --gtest_filter='*col_quant*:CudaGateMutants.ListCoversTheEnum' ) &
( CORES=6-9 run cuda_lora 150 $D/cuda/test_cuda_lora ) &
( CORES=10-11 run cuda_memory 90 $D/cuda/test_cuda_model --gtest_filter='CudaMemory.*'
  CORES=10-11 run adapter_cli 50 $D/load/test_load_adapter_cli_cuda; CORES=10-11 run units_model 50 $D/cuda/test_cuda_units_model ) &
# LoRA at 2B4T on the base held as codes: its pool peak is its own (its tok/s shares the GPU with the tests)
( CORES=12-15 run lora_codes 150 /tmp/b/bench/lora/lora_bench --device cuda --preset bitnet-b1.58-2b --seq 512 \
  --steps 3 --base codes ) &
wait
tar czf $OUT/tests.tgz -C /tmp s10logs
B=/tmp/b/bench/infer/decode_bench
CORES=0-1 run bench_new 90 $B --device cuda --preset bitnet-b1.58-2b --ctx 512 --batch 1,8,32 --prompt 32 --tokens 64
CORES=2-5 run units_step 90 /tmp/b/bench/train/train_bench gpt2-124m:16:1024:50304 --device cuda --linear units \
  --unit-backward --units-head --steps 3
tar czf $OUT/tests.tgz -C /tmp s10logs
grep -hE "^\[  (PASSED|FAILED)|planted|Skipped|^ *(1|8|32) |^gpt2|^lockstep lora|peak" $L/*.log | sort | uniq -c | head -60 > $OUT/passes
cat $OUT/summary $OUT/passes
