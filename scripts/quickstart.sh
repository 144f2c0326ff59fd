#!/usr/bin/env bash
# The main job on an embedded default: installs what is missing, builds, and
# runs `lockstep verify` (every verification suite). Extra arguments go to it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh release
exec ./build/release/lockstep verify "$@"
