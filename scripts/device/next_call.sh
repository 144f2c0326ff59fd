#!/bin/bash
# The checks session 8 left owed (not yet run; ~8 min of device time): run first in the next session.
#  1. test_cuda_lora alone (its facts demo did not finish in 180 s of a shared stream in session 8's call 3;
#     session 7 ran it in ~4 s): if it is slow, time its parts (base, greedy, finetune) before anything else.
#  2. the attention forward: the 64-query tile against the 128-query rule (session 8: 1.600 vs 1.612 ms), and
#     the units step with the v5 dk/dv loop (predicted ~123 ms, from 125.8).
#  3. the LoRA pair in one run (a same-run ratio: lockstep 1,969 tok/s in call 3, PEFT cut by the watchdog).
source scripts/device_prepare.sh --on-device; set +eu
L=/tmp/logs_next; rm -rf $L; mkdir -p $L; T0=$(date +%s)
stamp() { echo "$1 at $(( $(date +%s) - T0 )) s" >> $L/summary; }
( sleep ${WATCHDOG:-560}; stamp WATCHDOG; pkill -f /tmp/b/; pkill -f peft_reference ) &
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON > $L/cfg.log 2>&1
cmake --build /tmp/b -j 16 --target test_cuda_lora test_cuda_attention train_bench lora_bench > $L/build.log 2>&1 || grep -E "error|FAILED" -A5 $L/build.log | head -40
stamp built
timeout 200 /tmp/b/tests/cuda/test_cuda_lora > $L/test_cuda_lora.log 2>&1; stamp "test_cuda_lora exit $?"
timeout 60 /tmp/b/tests/cuda/test_cuda_attention --gtest_filter='*Gpt2*' > $L/attention_gpt2.log 2>&1; stamp "attention exit $?"
timeout 100 /tmp/b/bench/train/train_bench gpt2-124m:16:1024:50304 --device cuda --linear units --unit-backward --units-head --steps 3 > $L/units_step.log 2>&1; stamp "units step exit $?"
timeout 200 bash bench/lora/run.sh /tmp/b --seq 512 --steps 3 > $L/lora_run.log 2>&1; stamp "lora pair exit $?"
cat $L/summary; grep -E "^\[  (PASSED|FAILED)|facts on" $L/test_cuda_lora.log; grep -E "tile|loop|fwd " $L/attention_gpt2.log
grep -E "^gpt2" $L/units_step.log; tail -2 $L/lora_run.log | cut -c1-300
tar czf $OUT/logs.tgz -C /tmp logs_next
