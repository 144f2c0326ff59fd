#!/bin/bash
# session 8 device call 2 (~590 s), chained right after call 1 (the machine warm: /tmp/mt and /tmp/b reused;
# rebuilt when the machine is a fresh one). CPU (cores 2-15): the op-header mutants' second half.
# GPU (cores 0-1): test_cuda_gate_mutants (every CUDA mutant against the full gates), the units step profile.
source scripts/device_prepare.sh --on-device; set +eu
L=/tmp/logs2; rm -rf $L; mkdir -p $L; T0=$(date +%s)
( sleep ${WATCHDOG:-575}; echo "WATCHDOG at $(( $(date +%s) - T0 )) s" >> $L/summary; pkill -f mutation_report; pkill -f /tmp/b/; pkill -f /tmp/mt/ ) &
if [ ! -d /tmp/mt/.git ]; then
  echo "fresh machine: new /tmp/mt" >> $L/summary
  rm -rf /tmp/mt; mkdir -p /tmp/mt; tar cf - --exclude=./build . | tar xf - -C /tmp/mt
  ( cd /tmp/mt && git init -q && git add -A && git -c user.name=d -c user.email=d@d commit -qm tree ) > $L/mt_git.log 2>&1
  ( cd /tmp/mt && cmake -S . -B build/mcpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=OFF -DLOCKSTEP_WERROR=ON > $L/mcpu_cfg.log 2>&1 )
fi
( cd /tmp/mt && LOCKSTEP_MUTANT_JOBS=14 taskset -c 2-15 python3 scripts/mutation_report.py --build-dir build/mcpu --only "$MUTANTS" \
    --markdown $L/cpu_mutants.md > $L/cpu_mutants.log 2>&1; echo "cpu mutants exit $? at $(( $(date +%s) - T0 )) s" >> $L/summary ) &
M=$!
[ -f /tmp/b/build.ninja ] || cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON > $L/cfg.log 2>&1
cmake --build /tmp/b -j 16 --target test_cuda_gate_mutants train_bench > $L/build.log 2>&1 || { grep -E "error|FAILED" -A5 $L/build.log | head -60; }
echo "cuda built at $(( $(date +%s) - T0 )) s" >> $L/summary
( timeout 330 taskset -c 0-1 /tmp/b/tests/cuda/test_cuda_gate_mutants > $L/test_cuda_gate_mutants.log 2>&1
  echo "gate mutants exit $? at $(( $(date +%s) - T0 )) s" >> $L/summary
  timeout 100 taskset -c 0-1 /tmp/b/bench/train/train_bench gpt2-124m:16:1024:50304 --device cuda --linear units --unit-backward --units-head --steps 3 --profile $L/units_prof.json > $L/units_step.log 2>&1
  echo "units step exit $? at $(( $(date +%s) - T0 )) s" >> $L/summary ) &
G=$!
wait $G; echo "gpu stream done at $(( $(date +%s) - T0 )) s" >> $L/summary
wait $M
cat $L/summary
tail -25 $L/cpu_mutants.log
grep -E "^\[  (PASSED|FAILED) |rejected|caught|MISSED" $L/test_cuda_gate_mutants.log | head -30
grep -E "^gpt2|ms/step|tok/s" $L/units_step.log | head -8
tar czf $OUT/logs.tgz -C /tmp logs2
