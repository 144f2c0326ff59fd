#!/bin/bash
# What session 10 left owed on the GPU (its device budget ran out), to run first in session 11: ~6 min of
# wall after the start-up (bash scripts/device_prepare.sh here first; carry ["third_party", "data/janeaustenr"]).
#  1. The decode attention default `auto` (v2 when rows x query heads < the SM count, else v1) has not run:
#     decode_bench under auto, v1, v2 and with LOCKSTEP_DECODE_EPILOGUES=0, one after another, alone — which
#     of §11/§12 moved batch 32 and the prefill down (1,030 -> 846 tok/s, 1,632 -> 1,247) — and the graphs-off
#     profile of one batch-1 pass (docs/perf/DECODE_CUDA.md §13).
#  2. Tests the session-10 call cut at its deadline: test_load_adapter_cli_cuda (the CLI's cuda text = cpu text;
#     its start-up gates take ~45 s on 2 host cores: give it 4 and 150 s), test_cuda_gate_mutants' column
#     quantizer mutants, test_cuda_lora_trace and test_finetune_cli_cuda on the base held as codes.
#  3. The LoRA pair in one run (bench/lora/run.sh: lockstep on codes, then PEFT), alone.
source scripts/device_prepare.sh --on-device; set +eu
L=/tmp/s11logs; rm -rf $L; mkdir -p $L; BUDGET_S=${BUDGET_S:-540} source scripts/device/deadline.sh
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON > $L/cfg.log 2>&1
timeout $(left 200) cmake --build /tmp/b -j 16 --target decode_bench lora_bench lockstep_cli test_load_adapter_cli_cuda \
  test_cuda_gate_mutants test_cuda_lora_trace test_finetune_cli_cuda > $L/build.log 2>&1 \
  || grep -E "error|FAILED" -A5 $L/build.log | head -40 > $L/build_errors.log
stamp built
D=/tmp/b/tests
( CORES=0-3 run adapter_cli 150 $D/load/test_load_adapter_cli_cuda ) &
( CORES=4-7 run gate_mutants 150 $D/cuda/test_cuda_gate_mutants --gtest_filter='*col_quant*:CudaGateMutants.ListCoversTheEnum' ) &
( CORES=8-11 run lora_trace 120 $D/cuda/test_cuda_lora_trace ) &
( CORES=12-15 run finetune_cli 150 $D/train/test_finetune_cli_cuda ) &
wait
tar czf $OUT/logs.tgz -C /tmp s11logs
B=/tmp/b/bench/infer/decode_bench
ARGS="--device cuda --preset bitnet-b1.58-2b --ctx 512 --batch 1,8,32 --prompt 32 --tokens 64"
CORES=0-1 run bench_auto 80 $B $ARGS
CORES=0-1 LOCKSTEP_DECODE_ATTENTION=v1 run bench_v1 80 $B $ARGS
CORES=0-1 LOCKSTEP_DECODE_ATTENTION=v2 run bench_v2 80 $B $ARGS
CORES=0-1 LOCKSTEP_DECODE_EPILOGUES=0 run bench_noepi 80 $B $ARGS
CORES=0-1 LOCKSTEP_CUDA_GRAPHS=0 run profile 60 $B --device cuda --preset bitnet-b1.58-2b --ctx 512 --batch 1 \
  --prompt 32 --tokens 32 --profile 4
tar czf $OUT/logs.tgz -C /tmp s11logs
CORES=0-7 run lora_pair 300 bash bench/lora/run.sh /tmp/b --seq 512 --steps 3
tar czf $OUT/logs.tgz -C /tmp s11logs
grep -hE "^\[  (PASSED|FAILED)|planted|Skipped|^ *(1|8|32) |^lockstep lora|^peft|peak" $L/*.log | sort | uniq -c \
  | head -60 > $OUT/passes
cat $OUT/summary $OUT/passes
