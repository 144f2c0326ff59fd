#!/bin/bash
# session 7 device call B: the merged helpers' GPU tests (decode kernels, column quantizer, LoRA on CUDA),
# the decode benchmark with its profile, the unit-step profile, and the CPU training comparison on 2 pinned cores.
source scripts/device_prepare.sh --on-device; set +eu
L=/tmp/logs; mkdir -p $L; T0=$(date +%s)
( sleep 570; echo "WATCHDOG at $(( $(date +%s) - T0 )) s" >> $L/summary; pkill -f /tmp/b/ ; pkill -f torch_reference ) &
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON > $L/cfg.log 2>&1
cmake --build /tmp/b -j 16 --target decode_bench train_bench test_infer_decode_kernels_gpu test_infer_decode_gpu \
  test_cuda_col_quant test_cuda_lora test_cuda_lora_trace test_cuda_gate_mutants test_cuda_model test_cuda_units_model test_infer_decode_graphs_gpu test_cuda_gate_cases \
  > $L/build.log 2>&1 || { grep -E "error|FAILED" -A5 $L/build.log | head -60; tar czf $OUT/logs.tgz -C /tmp logs; exit 1; }
echo "built at $(( $(date +%s) - T0 )) s" | tee -a $L/summary
run() { local t=$1; local f=$(find /tmp/b/tests -name $t -type f | head -1); timeout ${2:-200} taskset -c 0-11 $f > $L/$t.log 2>&1; echo "$t exit $? at $(( $(date +%s) - T0 )) s" >> $L/summary; }
( timeout 150 taskset -c 12,13 python3 bench/train/torch_reference.py --bench /tmp/b/bench/train/train_bench --device cpu --threads 2 --steps 5 > $L/cpu_train.log 2>&1; echo "cpu train exit $? at $(( $(date +%s) - T0 )) s" >> $L/summary ) &
C=$!
( run test_cuda_gate_cases; run test_infer_decode_kernels_gpu; run test_infer_decode_gpu; run test_infer_decode_graphs_gpu; run test_cuda_col_quant; run test_cuda_units_model ) &
A=$!
( run test_cuda_lora 280; run test_cuda_lora_trace; run test_cuda_gate_mutants; run test_cuda_model ) &
B=$!
wait $A
timeout 80 /tmp/b/bench/infer/decode_bench --device cuda --preset bitnet-b1.58-2b --ctx 512 --batch 1,8,32 --prompt 32 --tokens 64 > $L/decode_bench.log 2>&1
echo "decode_bench exit $? at $(( $(date +%s) - T0 )) s" >> $L/summary
LOCKSTEP_CUDA_GRAPHS=0 timeout 60 /tmp/b/bench/infer/decode_bench --device cuda --preset bitnet-b1.58-2b --ctx 512 --batch 1 --prompt 32 --tokens 32 --profile 4 > $L/decode_prof.log 2>&1
echo "decode_bench profile exit $? at $(( $(date +%s) - T0 )) s" >> $L/summary
wait $B $C
timeout 80 /tmp/b/bench/train/train_bench gpt2-124m:16:1024:50304 --device cuda --linear units --unit-backward --units-head --steps 3 --profile $L/units_prof.json > $L/units_step.log 2>&1
echo "units step exit $? at $(( $(date +%s) - T0 )) s" >> $L/summary
cat $L/summary
for f in $L/test_*.log; do echo "== $(basename $f)"; grep -E "^\[  (PASSED|FAILED) |Failure|planted" $f | head -8; done
grep -E "^ *[0-9]+ |copy bandwidth|CUDA graphs" $L/decode_bench.log | head; grep -A16 "^kernel " $L/decode_prof.log | head -18; tail -12 $L/cpu_train.log; tail -6 $L/units_step.log
tar czf $OUT/logs.tgz -C /tmp logs
