#!/usr/bin/env bash
# The main job on an embedded default: installs what is missing, builds, trains
# the default model on the embedded corpus (`lockstep train`, no arguments:
# GPT-2 tiny on Jane Austen, <= 10 minutes on 2 cores, into runs/default), then
# samples from it. Extra arguments go to `lockstep train`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh release
./build/release/lockstep train "$@"
out=runs/default
for ((i = 1; i <= $#; i++)); do
  if [ "${!i}" = "--out" ]; then j=$((i + 1)); out=${!j}; fi
done
./build/release/lockstep generate --checkpoint "$out" --prompt "It is a truth universally acknowledged" \
  --max-tokens 80 --seed 1
