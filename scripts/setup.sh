#!/usr/bin/env bash
# Installs everything lockstep needs to build and test on Debian 12, from
# Debian's packages only. Idempotent: installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config git
  libgtest-dev libgmock-dev libbenchmark-dev   # tests, benchmarks
  libcli11-dev libfmt-dev nlohmann-json3-dev   # CLI, formatting, JSON
  libxxhash-dev                                # tensor bit-pattern hashing
  libmpfr-dev                                  # independent reference for the IEEE oracle
  zlib1g-dev                                   # inflating the corpus package's R data
  libpcre2-dev                                 # the tokenizers' general regex pre-tokenizer
  libopenmpi-dev openmpi-bin                   # data-parallel replicas under mpirun (docs/DISTRIBUTED.md)
  python3-matplotlib                           # scripts/plot_runs.py (loss curves to PNG) and its test
  clang-14 libclang-rt-14-dev                  # libFuzzer targets (scripts/fuzz.sh; CI runs each for a bounded time)
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

# Python packages the tests cross-check against (independent implementations).
if python3 -c "import sys" 2>/dev/null; then
  if ! python3 - <<'PY' 2>/dev/null
import importlib.metadata as m, sys
want = {}
for line in open("tests/requirements.txt"):
    line = line.split("#")[0].strip()
    if line:
        name, ver = line.split("==")
        want[name] = ver
sys.exit(0 if all(m.version(n) == v for n, v in want.items()) else 1)
PY
  then
    echo "setup: installing tests/requirements.txt (PyPI)"
    python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -r tests/requirements.txt
  else
    echo "setup: Python test packages present"
  fi
fi

# The embedded English corpus: Jane Austen's six novels from Debian's
# r-cran-janeaustenr (public domain text, MIT-licensed package). Only the .deb
# is fetched and unpacked into data/ (R itself is not installed); lockstep's
# own code reads the R data file (src/lockstep/data/rdata.*).
rdb=data/janeaustenr/Rdata.rdb
if [ ! -s "$rdb" ]; then
  echo "setup: fetching the corpus package r-cran-janeaustenr"
  tmp=$(mktemp -d)
  ( cd "$tmp" && apt-get download r-cran-janeaustenr 2>/dev/null || { apt-get update -qq && apt-get download r-cran-janeaustenr; } )
  dpkg-deb -x "$tmp"/r-cran-janeaustenr_*.deb "$tmp/x"
  mkdir -p data/janeaustenr
  cp "$tmp/x/usr/lib/R/site-library/janeaustenr/data/Rdata.rdb" "$rdb"
  cp "$tmp/x/usr/share/doc/r-cran-janeaustenr/copyright" data/janeaustenr/copyright
  rm -rf "$tmp"
fi
echo "setup: corpus package data at $rdb ($(stat -c %s "$rdb") bytes)"
