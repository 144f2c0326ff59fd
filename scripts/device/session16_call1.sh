#!/bin/bash
# Session 16, call 1 (replaces session 15's, never run: the early-launch planted bug now bites on a replay; early launch
# against PDL and both at batch 1 and 8), plus the CPU panel and ternary tests on the device host's CPU
# (an AVX-512 machine: session 16 rewrote the panels' AVX-512 path as one Isa-generic chains template and
# added the AVX2 paths on an AMD guest without AVX-512, so the AVX-512 code is re-checked here).
# bash scripts/device_prepare.sh here first; carry ["third_party"].
source scripts/device_prepare.sh --on-device; set +eu
L=/tmp/s16logs; rm -rf $L; mkdir -p $L; BUDGET_S=${BUDGET_S:-360} source scripts/device/deadline.sh
grep -m1 "model name" /proc/cpuinfo > $OUT/cpu; grep -m1 flags /proc/cpuinfo | tr ' ' '\n' | grep -cE "avx512f|avx512_vnni|amx_int8" >> $OUT/cpu
TARGETS="test_infer_decode_graphs_gpu decode_bench test_cpu_panel_gemm test_cpu_ternary_gemm test_infer_decode"
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON > $L/cfg.log 2>&1
timeout $(left 220) cmake --build /tmp/b -j 16 --target $TARGETS > $L/build.log 2>&1 \
  || grep -E "error|FAILED" -A5 $L/build.log | head -40 > $OUT/build_errors.log
stamp built
CORES=8-15 run cpu_panel 60 /tmp/b/tests/cpu/test_cpu_panel_gemm
CORES=8-15 run cpu_ternary 60 /tmp/b/tests/cpu/test_cpu_ternary_gemm
CORES=0-7 run graphs 90 /tmp/b/tests/infer/test_infer_decode_graphs_gpu
V="base;early:early=1;pdl:pdl=1;early_pdl:early=1,pdl=1;base2"
CORES=0-7 run bench 150 /tmp/b/bench/infer/decode_bench --device cuda --preset bitnet-b1.58-2b --ctx 512 \
  --batch 1,8 --prompt 32 --tokens 64 --variants "$V"
OMP_WAIT_POLICY=passive CORES=8-15 run cpu_decode 120 /tmp/b/tests/infer/test_infer_decode
tar czf $OUT/logs.tgz -C /tmp s16logs
grep -hE "^\[  (PASSED|FAILED)|planted|Skipped|SKIPPED" $L/graphs.log $L/cpu_*.log | sort | uniq -c | sort -rn | head -40 > $OUT/passes
grep -hE "^variant|^ +(1|8) |a replayed pass" $L/bench.log > $OUT/bench_table
cat $OUT/cpu $OUT/summary $OUT/passes $OUT/bench_table
