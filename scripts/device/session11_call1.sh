#!/bin/bash
# Session 11, call 1 (~8 min of wall after the start-up; bash scripts/device_prepare.sh here first; carry
# ["third_party", "data/janeaustenr"]):
#  1. the tests session 10's last call cut at its deadline, in four streams: test_load_adapter_cli_cuda,
#     test_cuda_gate_mutants' column quantizer mutants, test_cuda_lora_trace, test_finetune_cli_cuda;
#  2. ncu's device time for every kernel of two batch-1 decode passes with graphs on, as
#     timed (decode_bench --capture: the profiler window holds those passes only): how much of the
#     2.48 ms batch-1 pass is kernels and how much is the gaps between them (docs/perf/DECODE_CUDA.md §14).
source scripts/device_prepare.sh --on-device; set +eu
L=/tmp/s11logs; rm -rf $L; mkdir -p $L; BUDGET_S=${BUDGET_S:-520} source scripts/device/deadline.sh
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON > $L/cfg.log 2>&1
timeout $(left 220) cmake --build /tmp/b -j 16 --target decode_bench lockstep_cli test_load_adapter_cli_cuda \
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
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
CORES=0-7 run ncu $(left 200) $NCU --profile-from-start off --clock-control none --metrics gpu__time_duration.sum \
  --csv --log-file $L/ncu.csv $B --device cuda --preset bitnet-b1.58-2b --ctx 512 --batch 1 --prompt 32 \
  --tokens 8 --capture 2
python3 scripts/device/ncu_summary.py $L/ncu.csv 2 > $L/ncu_summary.txt 2>&1
cp $L/ncu_summary.txt $OUT/ 2>/dev/null
tar czf $OUT/logs.tgz -C /tmp s11logs
grep -hE "^\[  (PASSED|FAILED)|planted|Skipped|^ *(1|32) " $L/*.log | sort | uniq -c | head -40 > $OUT/passes
cat $OUT/summary $OUT/passes; head -50 $L/ncu_summary.txt
