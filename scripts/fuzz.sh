#!/usr/bin/env bash
# Builds lockstep's libFuzzer targets with clang-14 (ASan + UBSan) and runs
# each for N seconds (default 60), niced. Corpora live in build/fuzz/corpus/
# (seeded from the test data when present); crashes are written to
# build/fuzz/artifacts/ and make the script fail.
#   scripts/fuzz.sh [seconds] [target...]     targets: gguf gguf_model tiktoken gpt2 tokenizer_json encode regex safetensors rdata hf_config adapter_config shards train_config
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(gguf gguf_model tiktoken gpt2 tokenizer_json encode regex safetensors rdata hf_config adapter_config shards train_config)
CXX=${CXX_FUZZ:-clang++-14}
cmake -S fuzz -B build/fuzz -G Ninja -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/fuzz -j "${LOCKSTEP_JOBS:-2}" >/dev/null
td=../shared/testdata
mkdir -p build/fuzz/artifacts
seed() {  # seed <target> <files...>
  local dir=build/fuzz/corpus/$1; shift
  mkdir -p "$dir"
  for f in "$@"; do [ -f "$f" ] && head -c 65536 "$f" > "$dir/seed_$(basename "$f")"; done
  return 0
}
seed gguf tests/fixtures/tok/ggml-vocab-llama-spm.gguf tests/fixtures/tok/ggml-vocab-gpt-2.gguf
seed gguf_model tests/fixtures/fuzz/tiny-llama.gguf tests/fixtures/fuzz/tiny-bitnet.gguf
# tiktoken: 3 header bytes (pre-tokenizer kind, the special's id) before the ranks.
seed_prefixed() {  # seed_prefixed <target> <prefix bytes> <files...>
  local dir=build/fuzz/corpus/$1 prefix=$2; shift 2
  mkdir -p "$dir"
  for f in "$@"; do [ -f "$f" ] && { printf "$prefix"; head -c 65533 "$f"; } > "$dir/seed_$(basename "$f")_$(printf "$prefix" | od -An -tx1 | tr -d ' ')"; done
  return 0
}
seed_prefixed tiktoken '\000\000\001' $td/tokenizers/r50k_base.tiktoken   # GPT-2 matcher, special at 256
seed_prefixed tiktoken '\001\377\377' $td/tokenizers/cl100k_base.tiktoken # cl100k matcher, special far above
seed_prefixed tiktoken '\002\000\004' $td/tokenizers/cl100k_base.tiktoken # o200k regex (PCRE2)
seed gpt2 $td/tokenizers/gpt2/vocab.bpe
seed tokenizer_json tests/fixtures/tok/fuzz_seed_tokenizer.json $td/llama3/tokenizer.json
# regex: patterns of several named pre-tokenizers, a NUL, then test text.
mkdir -p build/fuzz/corpus/regex
for p in "'s|'t| ?\\p{L}+| ?\\p{N}+|\\s+(?!\\S)|\\s+" "(?i:'s|'t)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}" \
         "\\d{1,3}(?=(?:\\d{3})*\\b)" "(?=(\\d{3})+(?!\\d))" "[\\p{Lu}\\p{Lt}\\p{M}]*[\\p{Ll}\\p{M}]+" " ?[^(\\s|.,!?…。，、।۔،)]+"; do
  { printf '%s\0' "$p"; head -c 2000 $td/gguf-vocab/ggml-vocab-gpt-2.gguf.inp 2>/dev/null; } > "build/fuzz/corpus/regex/seed_$(printf '%s' "$p" | md5sum | cut -c1-8)"
done
seed safetensors tests/fixtures/fuzz/tiny.safetensors
seed rdata tests/fixtures/fuzz/tiny.rdb
seed hf_config tests/fixtures/fuzz/gpt2_config.json
seed adapter_config tests/fixtures/fuzz/adapter_config.json
seed shards tests/fixtures/fuzz/tiny.tokens
seed train_config tests/fixtures/fuzz/train_config.json
seed encode $td/tokenizers/TestPlans.txt $td/gguf-vocab/ggml-vocab-gpt-2.gguf.inp
status=0
for t in "${targets[@]}"; do
  echo "== fuzz_$t for ${secs}s =="
  log=build/fuzz/fuzz_$t.log
  if nice -n 10 build/fuzz/fuzz_"$t" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=4096 -timeout=20 \
       -artifact_prefix=build/fuzz/artifacts/"$t"- build/fuzz/corpus/"$t" >"$log" 2>&1; then
    grep -E "^Done|^#[0-9]+.*DONE" "$log" | tail -1
  else
    status=1
    echo "fuzz_$t FAILED (see $log):"
    grep -E "ERROR|SUMMARY|Test unit written" "$log" | head -5
  fi
done
exit $status
