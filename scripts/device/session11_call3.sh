#!/bin/bash
# Session 11, call 3 (right after call 2, on the warm machine: /tmp/b is call 2's build; rebuilt if absent):
#  1. the units step with the session-10 steps-and-codes kernel and with LOCKSTEP_COL_CODES=v2, alone;
#  2. ncu's device time for every kernel of two batch-1 decode passes with ALL_ON's choices.
source scripts/device_prepare.sh --on-device; set +eu
L=/tmp/s11logs3; rm -rf $L; mkdir -p $L; BUDGET_S=${BUDGET_S:-420} source scripts/device/deadline.sh
if [ ! -x /tmp/b/bench/train/train_bench ] || [ ! -x /tmp/b/bench/infer/decode_bench ]; then
  cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON > $L/cfg.log 2>&1
  timeout $(left 200) cmake --build /tmp/b -j 16 --target train_bench decode_bench > $L/build.log 2>&1
  stamp built
fi
T=/tmp/b/bench/train/train_bench
A="gpt2-124m:16:1024:50304 --device cuda --linear units --unit-backward --units-head --steps 3"
CORES=0-7 run units_step 100 $T $A
CORES=0-7 LOCKSTEP_COL_CODES=v2 run units_step_codes2 100 $T $A
tar czf $OUT/logs3.tgz -C /tmp s11logs3
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
( export ${ALL_ON:-LOCKSTEP_DECODE_NORM_GEMV=1 LOCKSTEP_HEAD_GEMV=v2 LOCKSTEP_DECODE_ATTENTION=v3}
  CORES=0-7 run ncu_all 150 $NCU --profile-from-start off --clock-control none --metrics gpu__time_duration.sum \
    --csv --log-file $L/ncu_all.csv /tmp/b/bench/infer/decode_bench --device cuda --preset bitnet-b1.58-2b \
    --ctx 512 --batch 1 --prompt 32 --tokens 8 --capture 2 )
python3 scripts/device/ncu_summary.py $L/ncu_all.csv 2 > $L/ncu_all_summary.txt 2>&1; cp $L/ncu_all_summary.txt $OUT/
tar czf $OUT/logs3.tgz -C /tmp s11logs3
grep -hE "^gpt2|tok/s|ms/step|peak" $L/units_step*.log | head -20 > $OUT/steps
cat $OUT/summary $OUT/steps; head -30 $L/ncu_all_summary.txt
