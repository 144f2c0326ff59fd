#!/usr/bin/env bash
# decode_bench --write-gguf / --model (ctest bench.DecodeBenchModelFile):
# a small model written with lockstep's writer runs from the file with the
# file's shapes (not decode_bench's defaults), for llama F16/Q8_0 and BitNet
# I2_S; bad input gives one line and a non-zero exit.
#   decode_bench_model_test.sh DECODE_BENCH WORK_DIR
set -euo pipefail
bench=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }
shape=(--layers 2 --d 64 --heads 4 --kv-heads 2 --ff 96 --vocab 320 --ctx 64)
for spec in "llama f16" "llama q8_0" "bitnet i2_s"; do
  read -r family type <<<"$spec"
  f=$work/$family-$type.gguf
  written=$("$bench" --family "$family" "${shape[@]}" --write-gguf "$f" --type "$type")
  [[ -s $f ]] || fail "$f not written"
  want=${written#*: }; want=${want% (*}  # the config summary
  out=$("$bench" --model "$f" --threads 1 --prompt 5 --tokens 3 --batch 1,2 2>"$work/err")
  echo "$out"
  head -1 <<<"$out" | grep -qF "decode_bench: $want on cpu" || fail "$spec: the file's config '$want' is not what ran: $(head -1 <<<"$out")"
  [[ $(awk '($1 == "1" || $1 == "2") && NF >= 6 && $3 > 0' <<<"$out" | wc -l) == 2 ]] || fail "$spec: no rows for batches 1 and 2"
done
expect_error() {  # WHAT PATTERN ARGS...
  local what=$1 pattern=$2; shift 2
  if "$bench" "$@" >"$work/out" 2>"$work/err"; then fail "$what: exit 0"; fi
  [[ $(wc -l <"$work/err") == 1 ]] || fail "$what: not one line: $(cat "$work/err")"
  grep -qE -e "$pattern" "$work/err" || fail "$what: '$(cat "$work/err")' does not say '$pattern'"
}
expect_error "missing file" "nope.gguf" --model "$work/nope.gguf"
expect_error "--type alone" "--type applies to --write-gguf" --type f16
expect_error "bad --type" "--type q4 is not one of" --write-gguf "$work/x.gguf" --type q4
expect_error "I2_S of a llama" "I2_S" "${shape[@]}" --write-gguf "$work/x.gguf" --type i2_s
expect_error "--model with --preset" "without --preset" --model "$work/llama-f16.gguf" --preset llama-tiny
expect_error "short context" "context 64 is shorter" --model "$work/llama-f16.gguf" --prompt 60 --tokens 10
echo "PASS"
