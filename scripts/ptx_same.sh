#!/usr/bin/env bash
# Is a kernel refactor free of code changes? Compiles CUDA translation units to
# PTX at a base revision and in the working tree, with the project's numeric
# flags, and compares them with symbol names masked (a type moved between
# namespaces renames kernels but changes no instruction). No GPU needed.
#   scripts/ptx_same.sh BASE_REV src/lockstep/backend/cuda/gemm.cu [more .cu ...]
# Exit 0 when every file's PTX is the same, 1 otherwise (the first differing
# lines are printed).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 BASE_REV FILE.cu [FILE.cu ...]" >&2; exit 2; }
base=$1; shift
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/base" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git worktree add --detach "$tmp/base" "$base" >/dev/null 2>&1
flags=(-O3 -DNDEBUG -std=c++20 -fmad=false -prec-div=true -prec-sqrt=true -ftz=false --expt-relaxed-constexpr
       -Xcompiler=-ffp-contract=off -arch=compute_90a -ptx -x cu)
same=0
for f in "$@"; do
  n=$(basename "$f" .cu)
  "$nvcc" -I"$tmp/base/src" "${flags[@]}" "$tmp/base/$f" -o "$tmp/$n.base.ptx"
  "$nvcc" -Isrc "${flags[@]}" "$f" -o "$tmp/$n.tree.ptx"
  for v in base tree; do sed -E 's/_Z[A-Za-z0-9_$]+/SYM/g' "$tmp/$n.$v.ptx" >"$tmp/$n.$v.norm"; done
  if cmp -s "$tmp/$n.base.norm" "$tmp/$n.tree.norm"; then
    echo "$f: same PTX as $base ($(wc -l <"$tmp/$n.tree.norm") lines, symbol names masked)"
  else
    echo "$f: PTX differs from $base:"
    diff "$tmp/$n.base.norm" "$tmp/$n.tree.norm" | head -20
    same=1
  fi
done
exit $same
