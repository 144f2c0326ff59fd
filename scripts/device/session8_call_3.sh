#!/bin/bash
# session 8 device call 3 (~560 s): the merged helpers' GPU work (decode fusion, attention v5, LoRA's frozen
# base held once, the decode-only CPU model): their GPU test binaries in three streams, then the benchmarks
# one at a time with the GPU to themselves; the CPU half of the LoRA benchmark on host cores 14-15 throughout.
source scripts/device_prepare.sh --on-device; set +eu
L=/tmp/logs3; rm -rf $L; mkdir -p $L; T0=$(date +%s)
( sleep ${WATCHDOG:-555}; echo "WATCHDOG at $(( $(date +%s) - T0 )) s" >> $L/summary; pkill -f /tmp/b/; pkill -f peft_reference ) &
nvidia-smi --query-gpu=name,clocks.max.sm,memory.used --format=csv > $L/gpu.txt
stamp() { echo "$1 at $(( $(date +%s) - T0 )) s" >> $L/summary; }
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON > $L/cfg.log 2>&1
cmake --build /tmp/b -j 16 --target test_infer_decode_kernels_gpu test_infer_decode_gpu test_infer_decode_graphs_gpu \
  test_cuda_attention test_cuda_lora test_cuda_lora_trace test_finetune_cli_cuda test_cuda_mutation_runtime test_cuda_model \
  decode_bench lora_bench > $L/build.log 2>&1 || { grep -E "error|FAILED" -A5 $L/build.log | head -60; }
stamp "built"
( taskset -c 14,15 python3 -c "
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:]); ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f'lora_bench cpu: peak resident {ru.ru_maxrss / 2**20:.2f} GiB (ru_maxrss)'); sys.exit(r.returncode)" \
    env OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive /tmp/b/bench/lora/lora_bench --device cpu --preset bitnet-tiny --seq 256 --steps 3 > $L/lora_bench_cpu.log 2>&1
  stamp "lora_bench cpu exit $?"
  taskset -c 14,15 timeout 200 python3 bench/lora/peft_reference.py --device cpu --dtype fp32 --threads 2 --preset bitnet-tiny --seq 256 --steps 3 > $L/peft_cpu.log 2>&1
  stamp "peft cpu exit $?" ) &
C=$!
run() { local t=$1; local f=$(find /tmp/b/tests -name $t -type f | head -1); timeout ${2:-150} taskset -c $CORES $f > $L/$t.log 2>&1; stamp "$t exit $?"; }
( CORES=0-3; run test_infer_decode_kernels_gpu 90; run test_infer_decode_gpu 150; run test_infer_decode_graphs_gpu 90 ) &
S1=$!
( CORES=4-7; run test_cuda_lora 180; run test_cuda_lora_trace 60; run test_finetune_cli_cuda 80 ) &
S2=$!
( CORES=8-11; timeout 200 taskset -c 8-11 python3 scripts/mutation_report.py --cuda --build-dir /tmp/b --markdown $L/cuda_mutants.md > $L/cuda_mutants.log 2>&1; stamp "cuda mutants exit $?"
  run test_cuda_model 120 ) &
S3=$!
( CORES=12-13; run test_cuda_attention 150 ) &
S4=$!
wait $S1 $S2 $S3 $S4; stamp "tests done"
B=/tmp/b/bench
timeout 60 taskset -c 0-3 $(find /tmp/b/tests -name test_cuda_attention -type f) --gtest_filter='*Gpt2*' > $L/attention_gpt2.log 2>&1; stamp "attention gpt2 exit $?"
timeout 80 taskset -c 0-3 $B/infer/decode_bench --device cuda --preset bitnet-b1.58-2b --ctx 512 --batch 1,8,32 --prompt 32 --tokens 64 > $L/decode_bench.log 2>&1; stamp "decode_bench exit $?"
LOCKSTEP_CUDA_GRAPHS=0 timeout 60 taskset -c 0-3 $B/infer/decode_bench --device cuda --preset bitnet-b1.58-2b --ctx 512 --batch 1 --prompt 32 --tokens 32 --profile 4 > $L/decode_prof.log 2>&1; stamp "decode profile exit $?"
timeout 160 taskset -c 0-3 bash bench/lora/run.sh /tmp/b --seq 512 --steps 3 > $L/lora_run.log 2>&1; stamp "lora run exit $?"
wait $C
cat $L/summary
for f in $L/test_*.log; do echo "== $(basename $f)"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|planted|fusion|adapter cpu|initialized|facts" $f | head -12 | cut -c1-240; done
tail -3 $L/cuda_mutants.log | cut -c1-300
grep -E "ms|TFLOP" $L/attention_gpt2.log | head -12 | cut -c1-200
grep -E "^ *[0-9]+ |copy bandwidth|graphs" $L/decode_bench.log | cut -c1-220
grep -A16 "^kernel " $L/decode_prof.log | head -18; grep "unprofiled" $L/decode_prof.log
tail -4 $L/lora_run.log | cut -c1-400; tail -2 $L/lora_bench_cpu.log $L/peft_cpu.log | cut -c1-300
tar czf $OUT/logs.tgz -C /tmp logs3
