#!/bin/bash
# Session 17, call 6 (bash scripts/device_prepare.sh here first; carry ["third_party", "data/janeaustenr"]): the
# units step (GPT-2 124M, units + unit backward + units head) under the column quantizer's codes kernel v1 and v2
# (LOCKSTEP_COL_CODES; call 2 timed v2 faster per call at every GPT-2 shape, beside another GPU test), alternated.
source scripts/device_prepare.sh --on-device; set +eu
L=/tmp/s17c6; rm -rf $L; mkdir -p $L; BUDGET_S=${BUDGET_S:-300} source scripts/device/deadline.sh
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON > $L/cfg.log 2>&1
timeout $(left 170) cmake --build /tmp/b -j 16 --target train_bench > $L/build.log 2>&1 \
  || grep -E "error|FAILED" -A5 $L/build.log | head -40 > $OUT/build_errors.log
stamp built
T=/tmp/b/bench/train/train_bench; A="gpt2-124m:16:1024:50304 --device cuda --linear units --unit-backward --units-head --steps 3"
for i in 1 2; do
  CORES=0-7 LOCKSTEP_COL_CODES=v1 run step_v1_$i 60 $T $A
  CORES=0-7 LOCKSTEP_COL_CODES=v2 run step_v2_$i 60 $T $A
done
tar czf $OUT/logs.tgz -C /tmp s17c6
for f in $L/step_*.log; do echo "== $(basename $f)"; grep -iE "ms/step|tok/s|gpt2-124m|column quantizer" $f | tail -4; done > $OUT/steps
cat $OUT/summary $OUT/steps
