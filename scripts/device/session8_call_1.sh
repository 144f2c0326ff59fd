#!/bin/bash
# session 8 device call 1 (~590 s): two streams on one machine.
#  CPU (cores 4-15): the unplanted op-header mutants, first half (mutation_report.py in a committed copy of
#    the tree at /tmp/mt, CUDA off; call 2 reuses that build when chained while the machine is warm).
#  GPU (cores 0-3): the CUDA half of the mutation report (19 mutants), test_finetune_cli_cuda, the decode
#    benchmark at 2B4T shapes (graphs on; graphs off under the step profile) with the GPU otherwise idle.
source scripts/device_prepare.sh --on-device; set +eu
L=/tmp/logs; rm -rf $L; mkdir -p $L; T0=$(date +%s)
( sleep ${WATCHDOG:-575}; echo "WATCHDOG at $(( $(date +%s) - T0 )) s" >> $L/summary; pkill -f mutation_report; pkill -f /tmp/b/; pkill -f /tmp/mt/ ) &
nvidia-smi --query-gpu=name,clocks.max.sm,memory.used --format=csv > $L/gpu.txt
# the mutants' tree: a committed copy (mutation_report plants and reverts in place through git)
rm -rf /tmp/mt; mkdir -p /tmp/mt; tar cf - --exclude=./build . | tar xf - -C /tmp/mt
( cd /tmp/mt && git init -q && git add -A && git -c user.name=d -c user.email=d@d commit -qm tree ) > $L/mt_git.log 2>&1
( cd /tmp/mt && cmake -S . -B build/mcpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=OFF -DLOCKSTEP_WERROR=ON > $L/mcpu_cfg.log 2>&1
  LOCKSTEP_MUTANT_JOBS=14 taskset -c 2-15 python3 scripts/mutation_report.py --build-dir build/mcpu --only "$MUTANTS" \
    --markdown $L/cpu_mutants.md > $L/cpu_mutants.log 2>&1; echo "cpu mutants exit $? at $(( $(date +%s) - T0 )) s" >> $L/summary ) &
M=$!
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON > $L/cfg.log 2>&1
cmake --build /tmp/b -j 16 --target test_cuda_mutation_runtime test_finetune_cli_cuda decode_bench train_bench \
  test_cuda_gate_mutants > $L/build.log 2>&1 || { grep -E "error|FAILED" -A5 $L/build.log | head -60; }
echo "cuda built at $(( $(date +%s) - T0 )) s" >> $L/summary
( export CORES=0-1
  timeout 220 taskset -c 0-1 python3 scripts/mutation_report.py --cuda --build-dir /tmp/b --markdown $L/cuda_mutants.md > $L/cuda_mutants.log 2>&1
  echo "cuda mutants exit $? at $(( $(date +%s) - T0 )) s" >> $L/summary
  timeout 80 taskset -c 0-1 /tmp/b/tests/train/test_finetune_cli_cuda > $L/test_finetune_cli_cuda.log 2>&1
  echo "finetune cli cuda exit $? at $(( $(date +%s) - T0 )) s" >> $L/summary
  timeout 80 taskset -c 0-1 /tmp/b/bench/infer/decode_bench --device cuda --preset bitnet-b1.58-2b --ctx 512 --batch 1,8,32 --prompt 32 --tokens 64 > $L/decode_bench.log 2>&1
  echo "decode_bench exit $? at $(( $(date +%s) - T0 )) s" >> $L/summary
  LOCKSTEP_CUDA_GRAPHS=0 timeout 60 taskset -c 0-1 /tmp/b/bench/infer/decode_bench --device cuda --preset bitnet-b1.58-2b --ctx 512 --batch 1 --prompt 32 --tokens 32 --profile 4 > $L/decode_prof.log 2>&1
  echo "decode profile exit $? at $(( $(date +%s) - T0 )) s" >> $L/summary ) &
G=$!
wait $G; echo "gpu stream done at $(( $(date +%s) - T0 )) s" >> $L/summary
wait $M
cat $L/summary
tail -25 $L/cpu_mutants.log; tail -30 $L/cuda_mutants.log | cut -c1-300
grep -E "^\[  (PASSED|FAILED) |adapter|hash" $L/test_finetune_cli_cuda.log | head -6
grep -E "^ *[0-9]+ |copy bandwidth|CUDA graphs|bound" $L/decode_bench.log | head; grep -A14 "^kernel " $L/decode_prof.log | head -16
tar czf $OUT/logs.tgz -C /tmp logs
