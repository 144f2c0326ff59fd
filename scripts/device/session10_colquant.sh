#!/bin/bash
# Session 10 (s10-colquant): the tiled column maxima and sums of the unit backward's bias gradient
# (backend/cuda/col_quant_sums.cu; LOCKSTEP_COL_SUMS=v1|v2|v3, default v2), built and proved on the host
# emulator only. One device call, ~8 min:
#  1. test_cuda_col_quant (6 tests): the gates admit the two-pass kernel under v1, v2 and v3; the bits
#     equal the three-pass kernel's and the CPU's under each, at ragged and GPT-2 shapes; the three
#     mutants (col_quant_last_chunk_dropped, col_quant_sums_in_pairs, col_quant_sums_tile_rows_swapped)
#     are rejected and the three-pass kernel serves; TimeAtGpt2Shapes prints v1 / v2 / v3 and the tiled
#     pass 1 alone (predicted, docs/perf/TRAIN_CUDA.md "Session 10": 16384 x 768 ~37 us, x 2304 ~45 us,
#     x 3072 ~58 us; v1 221 us mean).
#  2. test_cuda_gate_mutants, the column quantizer's mutants (the new one included) and the enum list;
#     test_cuda_units_model (the units step's bits and golden hashes unmoved).
#  3. train_bench, the GPT-2 124M units step, under v2 (default), v1 and v3, each profiled: predicted
#     125.8 -> ~117-118 ms a step, the "column maxima and sums" rows 10.60 -> ~2.1-2.6 ms.
# If a GPU test fails under v2: LOCKSTEP_COL_SUMS=v1 runs session 7's kernel without a rebuild.
source scripts/device_prepare.sh --on-device; set +eu
L=/tmp/logs_s10cq; rm -rf $L; mkdir -p $L; T0=$(date +%s)
stamp() { echo "$1 at $(( $(date +%s) - T0 )) s" >> $L/summary; }
( sleep ${WATCHDOG:-560}; stamp WATCHDOG; pkill -f /tmp/b/ ) &
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON -DLOCKSTEP_WERROR=ON > $L/cfg.log 2>&1
cmake --build /tmp/b -j 16 --target test_cuda_col_quant test_cuda_gate_mutants test_cuda_units_model train_bench \
  > $L/build.log 2>&1 || grep -E "error|FAILED" -A5 $L/build.log | head -40
stamp built
run() { local name=$1; shift; timeout ${LIMIT:-200} "$@" > $L/$name.log 2>&1; stamp "$name exit $?"; }
run col_quant /tmp/b/tests/cuda/test_cuda_col_quant
run gate_mutants /tmp/b/tests/cuda/test_cuda_gate_mutants \
  --gtest_filter='*col_quant*:CudaGateMutants.ListCoversTheEnum'
run units_model /tmp/b/tests/cuda/test_cuda_units_model
STEP="gpt2-124m:16:1024:50304 --device cuda --linear units --unit-backward --units-head --steps 3"
for v in v2 v1 v3; do
  LIMIT=120 LOCKSTEP_COL_SUMS=$v run train_$v /tmp/b/bench/train/train_bench $STEP --profile $L/profile_$v.json
done
cat $L/summary
grep -hE "^\[  (PASSED|FAILED)|^\[  FAILED|column quantizer|mutant '|col quantize" $L/*.log | head -60
for v in v2 v1 v3; do echo "== $v"; grep -hE "ms/step|tok/s|column maxima and sums|steps and codes|chunk maxima" \
  $L/train_$v.log | head -12; done
tar czf $OUT/logs.tgz -C /tmp logs_s10cq
