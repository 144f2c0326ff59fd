#!/usr/bin/env bash
# The pair on the device: lockstep's LoRA finetune (lora_bench) and transformers
# + PEFT's (peft_reference.py) at bitnet-b1.58-2B-4T's shapes, sequence 512.
# Prints one line each. Usage: bench/lora/run.sh BUILD_DIR [extra flags for both]
set -euo pipefail
build=${1:?usage: bench/lora/run.sh BUILD_DIR [--seq N --batch N --steps N]}
shift
here=$(cd "$(dirname "$0")" && pwd)
"$build/bench/lora/lora_bench" --device cuda --preset bitnet-b1.58-2b "$@"
python3 "$here/peft_reference.py" "$@"
