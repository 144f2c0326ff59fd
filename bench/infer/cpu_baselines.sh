#!/usr/bin/env bash
# lockstep's CPU decode against llama.cpp and bitnet.cpp on the same GGUF
# files and the same threads (docs/INFERENCE.md, "CPU against llama.cpp and
# bitnet.cpp"; docs/perf/DECODE_CPU.md, "Baselines").
#
#   bench/infer/cpu_baselines.sh [BUILD_DIR]      (default build/baseline)
#
# 1. Files, written by lockstep's own GGUF writer (decode_bench --write-gguf,
#    load::write_gguf_model) at decode_bench's default LLaMA shapes (8 layers,
#    d 1024, 16 heads / 4 KV, FFN 2816, vocab 32000): llama F16, llama Q8_0,
#    and the same shapes as BitNet b1.58 in F16 (code · scale) and in I2_S
#    (embedding F16); with BITNET_2B4T=1 also the 2B4T shapes in I2_S. The
#    BitNet files are also copied under the architecture name "bitnet"
#    (gguf_relabel_arch.py: llama.cpp's and bitnet.cpp's fork's name).
# 2. llama.cpp's llama-bench, built once from PyPI's llama-cpp-python source
#    distribution (its vendor/llama.cpp; GGML_NATIVE=ON, no curl, -j 2) under
#    $CACHE/llamacpp.
# 3. bitnet.cpp's llama-bench (I2_S kernels, TL2 off), built once under
#    $CACHE/bitnetcpp from a source tree given as BITNET_SRC (microsoft/BitNet
#    with 3rdparty/llama.cpp filled in), or assembled from git mirrors given as
#    BITNET_GIT and BITNET_FORK_GIT (see BITNET_COMMIT below). Skipped, saying
#    why, when neither is there.
# 4. Runs `llama-bench -m FILE -t T -p P -n N -o jsonl` (mean ± sd of its 5
#    repetitions) and `decode_bench --model FILE --threads T --prompt P
#    --tokens N --batch 1,1,1` (median and range of 3 sessions) on each
#    file, notes the 1-minute load average beside each figure (other builds
#    share the machine), and prints one table.
# 5. Checks the files mean the same model to both: llama.cpp's logits
#    (llama_logits.cpp) against lockstep's (load_tool logits) on the llama files.
#
# Environment: CACHE (default /work/.cache), THREADS (2), PROMPT (32), TOKENS (16),
# REPS (3, decode_bench's sessions), BITNET_2B4T (0).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build/baseline}
CACHE=${CACHE:-/work/.cache}
THREADS=${THREADS:-2}
PROMPT=${PROMPT:-32}
TOKENS=${TOKENS:-16}
MODELS=$CACHE/lockstep_baselines
DECODE_BENCH=$BUILD/bench/infer/decode_bench
LLAMACPP=$CACHE/llamacpp
BITNETCPP=$CACHE/bitnetcpp
# The newest microsoft/BitNet commit whose llama.cpp submodule commit is in
# Eddie-Wang1120/llama.cpp as it can be fetched here (merge-dev, 2024-10-18);
# later BitNet commits point at commits that fork no longer holds (and, since
# 2026-07, at isHuangXin/llama.cpp).
BITNET_COMMIT=${BITNET_COMMIT:-c82b5e6}
BITNET_FORK_COMMIT=${BITNET_FORK_COMMIT:-406a5036}
BITNET_GIT=${BITNET_GIT:-/work/.mirror/microsoft+BitNet/repo}
BITNET_FORK_GIT=${BITNET_FORK_GIT:-/work/.mirror/Eddie-Wang1120+llama.cpp/repo}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-/work} CCACHE_DIR=${CCACHE_DIR:-/work/.ccache}
export OMP_WAIT_POLICY=passive

die() { echo "cpu_baselines: $*" >&2; exit 1; }
log() { echo "cpu_baselines: $*" >&2; }
load1() { cut -d' ' -f1 /proc/loadavg; }

[[ -x $DECODE_BENCH ]] || die "$DECODE_BENCH is not built (cmake --build $BUILD --target decode_bench)"
mkdir -p "$MODELS"

# --- 1. the files -----------------------------------------------------------
write_model() {  # FILE FAMILY TYPE: rewritten when decode_bench is newer (the writer may have changed)
  if [[ ! -s $1 || $DECODE_BENCH -nt $1 ]]; then
    "$DECODE_BENCH" --family "$2" --write-gguf "$1" --type "$3" >&2 || die "writing $1 failed"
  fi
}
write_model "$MODELS/llama-f16.gguf" llama f16
write_model "$MODELS/llama-q8_0.gguf" llama q8_0
write_model "$MODELS/bitnet-f16.gguf" bitnet f16   # the projections as code · scale, bitnet.cpp's float files
write_model "$MODELS/bitnet-i2_s.gguf" bitnet i2_s
# BITNET_2B4T=1: also the synthetic 2B4T shapes in I2_S (lockstep convert
# --synthetic: TERNARY2 codes, 5 GB of memory, 1.2 GB file), for bitnet.cpp only.
if [[ ${BITNET_2B4T:-0} == 1 && ! -s $MODELS/bitnet-2b4t-i2_s.gguf ]]; then
  [[ -x $BUILD/lockstep ]] || die "$BUILD/lockstep is not built (target lockstep_cli), needed for BITNET_2B4T=1"
  "$BUILD/lockstep" convert --synthetic bitnet-b1.58-2b --type i2_s --out "$MODELS/bitnet-2b4t-i2_s.gguf" >&2
fi
# llama.cpp names the BitNet architecture "bitnet", and so does bitnet.cpp's
# buildable fork; lockstep and bitnet.cpp since 2025 write "bitnet-b1.58" for
# the 2B4T layout. The relabelled copies hold the same tensors, byte for byte.
relabel() {
  [[ $MODELS/$1.arch-bitnet.gguf -nt $MODELS/$1.gguf ]] ||
    python3 "$ROOT/bench/infer/gguf_relabel_arch.py" "$MODELS/$1.gguf" "$MODELS/$1.arch-bitnet.gguf" bitnet >&2
}
relabel bitnet-f16
relabel bitnet-i2_s
[[ -s $MODELS/bitnet-2b4t-i2_s.gguf ]] && relabel bitnet-2b4t-i2_s

# --- 2. llama.cpp -------------------------------------------------------------
LLAMA_BENCH=$LLAMACPP/build/bin/llama-bench
if [[ ! -x $LLAMA_BENCH ]]; then
  log "building llama.cpp's llama-bench under $LLAMACPP (once; about 15 minutes on 2 cores)"
  mkdir -p "$LLAMACPP"
  (
    cd "$LLAMACPP"
    sdist=$(ls llama_cpp_python-*.tar.gz 2>/dev/null | tail -1 || true)
    if [[ -z $sdist ]]; then
      pip download --no-binary :all: --no-deps llama-cpp-python -d . >&2
      sdist=$(ls llama_cpp_python-*.tar.gz | tail -1)
    fi
    dir=${sdist%.tar.gz}
    # m: the archive's 2022 mtimes and its vendor/llama.cpp/.git (a gitdir
    # pointer to a directory the sdist lacks) keep ninja re-running cmake.
    [[ -d $dir ]] || { tar xzmf "$sdist"; rm -f "$dir/vendor/llama.cpp/.git"; }
    ln -sfn "$dir/vendor/llama.cpp" src
    cmake -S src -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF -DGGML_CUDA=OFF \
      -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >&2
    cmake --build build -j 2 --target llama-bench >&2
  ) || die "building llama.cpp failed"
fi

# --- 3. bitnet.cpp ------------------------------------------------------------
BITNET_BENCH=$BITNETCPP/build/bin/llama-bench
BITNET_WHY=""
if [[ ! -x $BITNET_BENCH ]]; then
  src=${BITNET_SRC:-$BITNETCPP/src}
  if [[ -n ${BITNET_SRC:-} && ! -d $src/3rdparty/llama.cpp/ggml ]]; then
    BITNET_WHY="BITNET_SRC=$BITNET_SRC has no 3rdparty/llama.cpp/ggml"
  elif [[ ! -d $src/3rdparty/llama.cpp/ggml ]]; then
    if git -C "$BITNET_GIT" cat-file -e "$BITNET_COMMIT^{commit}" 2>/dev/null &&
       git -C "$BITNET_FORK_GIT" cat-file -e "$BITNET_FORK_COMMIT^{commit}" 2>/dev/null; then
      rm -rf "$src" && mkdir -p "$src/3rdparty/llama.cpp"
      git -C "$BITNET_GIT" archive "$BITNET_COMMIT" | tar x -C "$src"
      # the fork's models/ holds vocabulary files the mirror lacks: everything else
      paths=$(git -C "$BITNET_FORK_GIT" ls-tree --name-only "$BITNET_FORK_COMMIT" | grep -vx models)
      # shellcheck disable=SC2086
      git -C "$BITNET_FORK_GIT" archive "$BITNET_FORK_COMMIT" -- $paths | tar x -C "$src/3rdparty/llama.cpp"
    else
      BITNET_WHY="no bitnet.cpp source (give BITNET_SRC, or BITNET_GIT + BITNET_FORK_GIT holding $BITNET_COMMIT / $BITNET_FORK_COMMIT)"
    fi
  fi
  if [[ -z $BITNET_WHY ]]; then
    log "building bitnet.cpp's llama-bench under $BITNETCPP (once)"
    (
      cd "$src"
      # bitnet.cpp's own build step (setup_env.py's gen_code for the 3B shapes):
      # the TL2 header is compiled even with TL2 off.
      [[ -s include/bitnet-lut-kernels.h ]] ||
        python3 utils/codegen_tl2.py --model bitnet_b1_58-3B --BM 160,320,320 --BK 96,96,96 --bm 32,32,32 >&2
      cmake -S . -B "$BITNETCPP/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBITNET_X86_TL2=OFF \
        -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
        -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >&2
      cmake --build "$BITNETCPP/build" -j 2 --target llama-bench >&2
    ) || BITNET_WHY="the bitnet.cpp build failed (log above)"
  fi
fi

# --- 4. the runs --------------------------------------------------------------
ROWS=()
first_error() {  # the first line of FILE that says what went wrong, '|' made '/' for the table
  { grep -m1 -E 'of type [0-9]+|unknown model architecture|key not found' "$1" ||
    grep -m1 -iE 'error|failed|unknown|invalid' "$1" || tail -1 "$1"; } | tr '|' '/' | cut -c1-160 || true
}
# llama-bench's jsonl: one line per test (pp P, then tg N), avg_ts ± stddev_ts over its 5 repetitions.
run_llama_bench() {  # ENGINE BENCH FILE LABEL
  local load out pp_tg
  load=$(load1)
  if out=$("$2" -m "$3" -t "$THREADS" -p "$PROMPT" -n "$TOKENS" -o jsonl 2>"$MODELS/last-llama-bench.err"); then
    pp_tg=$(echo "$out" | python3 -c '
import json, sys
tests = [json.loads(l) for l in sys.stdin if l.strip()]
pp = next(j for j in tests if j["n_prompt"] > 0)
tg = next(j for j in tests if j["n_gen"] > 0)
print("%.1f ± %.1f|%.2f ± %.2f" % (pp["avg_ts"], pp["stddev_ts"], tg["avg_ts"], tg["stddev_ts"]))')
    ROWS+=("$4|$1|$pp_tg|$load")
  else
    # again verbose, for the loader's own line on why
    "$2" -m "$3" -t "$THREADS" -p 0 -n 1 -r 1 -v >"$MODELS/last-llama-bench.err" 2>&1 || true
    ROWS+=("$4|$1|refused: $(first_error "$MODELS/last-llama-bench.err")||$load")
  fi
}
# decode_bench: REPS sessions of batch 1 on one loaded model (--batch 1,1,1),
# the median and the range of their tokens/s.
REPS=${REPS:-3}
run_lockstep() {  # FILE LABEL [DECODE_BENCH FLAGS...]
  local load line batches file=$1 label=$2
  shift 2
  load=$(load1)
  batches=$(printf '1%.0s,' $(seq "$REPS")); batches=${batches%,}
  if line=$("$DECODE_BENCH" --model "$file" "$@" --threads "$THREADS" --prompt "$PROMPT" --tokens "$TOKENS" --batch "$batches" 2>/dev/null |
            awk '$1 == "1" && NF >= 6 {print $2, $3}' | python3 -c '
import statistics, sys
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
if not rows: sys.exit(1)
col = lambda i, f: f % statistics.median(r[i] for r in rows) + (" (%s–%s)" % (f % min(r[i] for r in rows), f % max(r[i] for r in rows)) if len(rows) > 1 else "")
print(col(0, "%.1f") + "|" + col(1, "%.2f"))'); then
    ROWS+=("$label|lockstep decode_bench|$line|$load")
  else
    ROWS+=("$label|lockstep decode_bench|failed||$load")
  fi
}
LLAMACPP_NAME="llama.cpp (vendored by $(readlink "$LLAMACPP/src" | cut -d/ -f1 | tr _ -))"
BITNETCPP_NAME="bitnet.cpp $BITNET_COMMIT (I2_S kernels)"
bitnetcpp() {  # FILE LABEL
  if [[ -z $BITNET_WHY ]]; then
    run_llama_bench "$BITNETCPP_NAME" "$BITNET_BENCH" "$1" "$2"
  else
    ROWS+=("$2|bitnet.cpp|not run: $BITNET_WHY||")
  fi
}
for f in llama-f16 llama-q8_0; do
  run_lockstep "$MODELS/$f.gguf" "$f"
  run_llama_bench "$LLAMACPP_NAME" "$LLAMA_BENCH" "$MODELS/$f.gguf" "$f"
done
run_lockstep "$MODELS/bitnet-f16.gguf" bitnet-f16
run_llama_bench "$LLAMACPP_NAME" "$LLAMA_BENCH" "$MODELS/bitnet-f16.gguf" bitnet-f16
run_llama_bench "$LLAMACPP_NAME" "$LLAMA_BENCH" "$MODELS/bitnet-f16.arch-bitnet.gguf" "bitnet-f16, arch relabelled"
run_lockstep "$MODELS/bitnet-i2_s.gguf" bitnet-i2_s
run_llama_bench "$LLAMACPP_NAME" "$LLAMA_BENCH" "$MODELS/bitnet-i2_s.gguf" bitnet-i2_s
bitnetcpp "$MODELS/bitnet-i2_s.arch-bitnet.gguf" "bitnet-i2_s, arch relabelled"
if [[ -s $MODELS/bitnet-2b4t-i2_s.gguf ]]; then
  # decode_bench --model runs the decode-only model on the CPU (1.18 GB for
  # 2B4T; the training model's F32 masters would take ~40 GB); a 512-position
  # cache is enough for the prompt and the tokens.
  run_lockstep "$MODELS/bitnet-2b4t-i2_s.gguf" bitnet-2b4t-i2_s --ctx 512
  bitnetcpp "$MODELS/bitnet-2b4t-i2_s.arch-bitnet.gguf" "bitnet-2b4t-i2_s, arch relabelled"
fi

# --- 5. the same values? ------------------------------------------------------
# llama.cpp's logits against lockstep's on each llama file (load_tool's fixed
# tokens): the file means the same model to both. lockstep computes in f32 on
# the widened values, llama.cpp with its F16/Q8_0 kernels (activations rounded
# to f16 / q8 blocks): close, not equal. A llama file whose q/k rows missed
# llama.cpp's permutation gives max |diff| ~0.6 and corr 0.977 on llama-f16
# (tried: the rows un-permuted in a copy), against ~0.003 / 0.999999 here.
LOAD_TOOL=$BUILD/tests/load/load_tool
LOGITS_ROWS=()
if [[ -x $LOAD_TOOL ]]; then
  LLAMA_LOGITS=$LLAMACPP/build/bin/llama_logits
  if [[ ! -x $LLAMA_LOGITS || $ROOT/bench/infer/llama_logits.cpp -nt $LLAMA_LOGITS ]]; then
    g++ -O2 -std=c++17 "$ROOT/bench/infer/llama_logits.cpp" -I "$LLAMACPP/src/include" -I "$LLAMACPP/src/ggml/include" \
      -L "$LLAMACPP/build/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$LLAMACPP/build/bin" -o "$LLAMA_LOGITS" >&2
  fi
  for f in llama-f16 llama-q8_0; do
    "$LLAMA_LOGITS" "$MODELS/$f.gguf" >"$MODELS/$f.llama-logits" 2>/dev/null || { LOGITS_ROWS+=("$f|llama.cpp did not run it"); continue; }
    "$LOAD_TOOL" logits "$MODELS/$f.gguf" >"$MODELS/$f.lockstep-logits"
    LOGITS_ROWS+=("$f|$(python3 - "$MODELS/$f.llama-logits" "$MODELS/$f.lockstep-logits" <<'PY'
import math, struct, sys
a = [float(x) for x in open(sys.argv[1])]
b = [struct.unpack("<f", struct.pack("<I", int(h, 16)))[0] for h in open(sys.argv[2]).read().split()]
if len(a) != len(b): sys.exit(f"{len(a)} logits against {len(b)}")
ma, mb = sum(a) / len(a), sum(b) / len(b)
cov = sum((x - ma) * (y - mb) for x, y in zip(a, b))
corr = cov / math.sqrt(sum((x - ma) ** 2 for x in a) * sum((y - mb) ** 2 for y in b))
diff = max(abs(x - y) for x, y in zip(a, b))
print("%.4g|%.4g|%.7f|%s" % (diff, max(map(abs, b)), corr, "same" if a.index(max(a)) == b.index(max(b)) else "differs"))
PY
)")
  done
else
  LOGITS_ROWS+=("-|not compared: $LOAD_TOOL is not built (target load_tool)")
fi

echo
echo "CPU decode, $THREADS threads, prompt $PROMPT, $TOKENS tokens, batch 1 ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(date -u '+%Y-%m-%d %H:%M UTC'))"
echo
echo "| file | engine | prefill t/s (pp$PROMPT) | decode t/s (tg$TOKENS) | load (1 min) |"
echo "|---|---|---:|---:|---:|"
for r in "${ROWS[@]}"; do
  IFS='|' read -r file engine pp tg load <<<"$r"
  echo "| $file | $engine | $pp | $tg | $load |"
done
echo
echo "llama.cpp's logits against lockstep's on the same file (11 fixed tokens, the last position):"
echo
echo "| file | max abs diff | max abs logit | correlation | argmax |"
echo "|---|---:|---:|---:|---|"
for r in "${LOGITS_ROWS[@]}"; do
  IFS='|' read -r file d m c am <<<"$r"
  echo "| $file | $d | $m | $c | $am |"
done
