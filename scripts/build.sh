#!/usr/bin/env bash
# Configures and builds one flavour of lockstep into build/<flavour>.
#   scripts/build.sh [release|sanitize|debug] [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."
flavour=${1:-release}
shift || true
case "$flavour" in
  release)  args=(-DCMAKE_BUILD_TYPE=Release) ;;
  sanitize) args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g" -DLOCKSTEP_SANITIZE=ON -DLOCKSTEP_CUDA=OFF -DLOCKSTEP_BENCH=OFF) ;;
  debug)    args=(-DCMAKE_BUILD_TYPE=Debug) ;;
  *) echo "build.sh: unknown flavour '$flavour' (release, sanitize, debug)" >&2; exit 2 ;;
esac
jobs=${LOCKSTEP_JOBS:-$(nproc)}
cmake -S . -B "build/$flavour" -G Ninja -DLOCKSTEP_WERROR=ON "${args[@]}" "$@" >/dev/null
cmake --build "build/$flavour" -j "$jobs"
