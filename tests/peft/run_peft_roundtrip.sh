#!/usr/bin/env bash
# The PEFT round trip on the device host (torch, transformers, peft installed):
#   bash tests/peft/run_peft_roundtrip.sh [BUILD_DIR]     (default build/release)
# builds adapter_tool if needed and runs tests/peft/peft_roundtrip.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/release}
cmake --build "$build" --target adapter_tool
python3 tests/peft/peft_roundtrip.py "$build/tests/load/adapter_tool" "$build/peft_roundtrip"
