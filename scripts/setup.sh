#!/usr/bin/env bash
# Installs everything lockstep needs to build and test on Debian 12, from
# Debian's packages only. Idempotent: installs only what is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libgtest-dev libgmock-dev libbenchmark-dev   # tests, benchmarks
  libcli11-dev libfmt-dev nlohmann-json3-dev   # CLI, formatting, JSON
  libxxhash-dev                                # tensor bit-pattern hashing
  libmpfr-dev                                  # independent reference for the IEEE oracle
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all Debian packages present"
fi

if [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup: CUDA found at /usr/local/cuda ($(/usr/local/cuda/bin/nvcc --version | tail -1))"
else
  echo "setup: no nvcc at /usr/local/cuda: building the CPU backend only"
fi
