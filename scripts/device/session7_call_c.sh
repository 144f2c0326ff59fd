#!/bin/bash
# session 7 device call C (final, ~400 s of device time left): the merged tree's GPU tests in three streams,
# the decode benchmark (graphs on; then graphs off under the step profile), the units step profile.
source scripts/device_prepare.sh --on-device; set +eu
L=/tmp/logs; mkdir -p $L; T0=$(date +%s)
( sleep 365; echo "WATCHDOG at $(( $(date +%s) - T0 )) s" >> $L/summary; pkill -f /tmp/b/ ) &
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON > $L/cfg.log 2>&1
cmake --build /tmp/b -j 16 --target decode_bench train_bench test_infer_decode_kernels_gpu test_infer_decode_gpu \
  test_infer_decode_graphs_gpu test_cuda_lora test_cuda_lora_trace test_cuda_model test_cuda_units_model lora_bench \
  > $L/build.log 2>&1 || { grep -E "error|FAILED" -A5 $L/build.log | head -60; tar czf $OUT/logs.tgz -C /tmp logs; exit 1; }
echo "built at $(( $(date +%s) - T0 )) s" | tee -a $L/summary
run() { local t=$1; local f=$(find /tmp/b/tests -name $t -type f | head -1); timeout ${2:-150} taskset -c $CORES $f > $L/$t.log 2>&1; echo "$t exit $? at $(( $(date +%s) - T0 )) s" >> $L/summary; }
( CORES=0-5; run test_cuda_lora_trace 60; run test_infer_decode_gpu; run test_infer_decode_graphs_gpu;
  timeout 70 taskset -c 0-5 /tmp/b/bench/infer/decode_bench --device cuda --preset bitnet-b1.58-2b --ctx 512 --batch 1,8,32 --prompt 32 --tokens 64 > $L/decode_bench.log 2>&1
  echo "decode_bench exit $? at $(( $(date +%s) - T0 )) s" >> $L/summary
  timeout 60 taskset -c 0-5 python3 bench/lora/peft_reference.py --steps 3 > $L/peft_bench.log 2>&1
  echo "peft bench exit $? at $(( $(date +%s) - T0 )) s" >> $L/summary ) &
A=$!
( CORES=6-10; run test_cuda_lora 150; LOCKSTEP_CUDA_GRAPHS=0 timeout 60 taskset -c 6-10 /tmp/b/bench/infer/decode_bench --device cuda --preset bitnet-b1.58-2b --ctx 512 --batch 1 --prompt 32 --tokens 32 --profile 4 > $L/decode_prof.log 2>&1
  echo "decode profile exit $? at $(( $(date +%s) - T0 )) s" >> $L/summary
  timeout 70 taskset -c 6-10 /tmp/b/bench/lora/lora_bench --device cuda --preset bitnet-b1.58-2b --steps 3 > $L/lora_bench.log 2>&1
  echo "lora_bench exit $? at $(( $(date +%s) - T0 )) s" >> $L/summary ) &
B=$!
( CORES=11-15; run test_cuda_model 110; run test_cuda_units_model 80;
  timeout 60 taskset -c 11-15 /tmp/b/bench/train/train_bench gpt2-124m:16:1024:50304 --device cuda --linear units --unit-backward --units-head --steps 3 --profile $L/units_prof.json > $L/units_step.log 2>&1
  echo "units step exit $? at $(( $(date +%s) - T0 )) s" >> $L/summary
  OMP_WAIT_POLICY=passive timeout 40 taskset -c 14,15 /tmp/b/bench/infer/decode_bench --family bitnet --prompt 32 --tokens 16 --batch 1,8 --threads 2 > $L/cpu_decode.log 2>&1
  echo "cpu decode exit $? at $(( $(date +%s) - T0 )) s" >> $L/summary ) &
C=$!
wait $A $B $C
cat $L/summary
for f in $L/test_*.log; do echo "== $(basename $f)"; grep -E "^\[  (PASSED|FAILED) |Failure|planted|refused" $f | head -8; done
grep -E "^ *[0-9]+ |copy bandwidth|CUDA graphs" $L/decode_bench.log | head; grep -A14 "^kernel " $L/decode_prof.log | head -16; grep -E "^gpt2|ms/step|^kernel|col_quant|quantize" $L/units_step.log | head -20; tail -3 $L/lora_bench.log $L/peft_bench.log; tail -4 $L/cpu_decode.log
tar czf $OUT/logs.tgz -C /tmp logs
