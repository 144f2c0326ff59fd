#!/usr/bin/env bash
# The independent reference's cases against transformers' own GPT2LMHeadModel,
# LlamaForCausalLM and BitNetForCausalLM (float64; the device machine has torch
# and transformers). One command, from the repository root:
#   bash scripts/reference_hf_device.sh [BUILD_DIR]
# Builds reference_dump (CPU only: the cases are lockstep's double-precision
# spec model), writes the case directories, runs tests/reference/hf_reference.py.
# Prints one line per case and "OK: 8 of 8 cases agree with transformers".
set -euo pipefail
build=${1:-build/reference-device}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=OFF > /dev/null
cmake --build "$build" --target reference_dump -j "$(nproc)"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$build/tests/reference/reference_dump" "$out" > /dev/null
python3 tests/reference/hf_reference.py "$out"/*
