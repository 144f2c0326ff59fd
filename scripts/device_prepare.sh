#!/usr/bin/env bash
# Prepares third_party/ for the device machine, which has no package registry and
# lacks two development packages lockstep builds against: xxHash's header and
# PCRE2 (headers, static library, a pkg-config file). Run it here, then name
# third_party in the device call's carry list, and on the device run
#   source scripts/device_prepare.sh --on-device
# before cmake: it writes the pkg-config file for the carried PCRE2 and sets
# PKG_CONFIG_PATH. (third_party/xxhash and third_party/pcre2 are ignored by git.)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Sourced on the device: leave the caller's shell options as they were (a
# `set -u` leaking from here stopped a device script at its first unset variable).
if [ "${1:-}" = "--on-device" ]; then
  pc="$root/third_party/pcre2/lib/pkgconfig"
  cat > "$pc/libpcre2-8.pc" <<PC
prefix=$root/third_party/pcre2
libdir=\${prefix}/lib
includedir=\${prefix}/include
Name: libpcre2-8
Description: PCRE2 8-bit (carried to the device: static)
Version: 10.42
Libs: -L\${libdir} -lpcre2-8
Cflags: -I\${includedir}
PC
  export PKG_CONFIG_PATH="$pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  # Tests that read ../shared/testdata (the LLaMA-3 tokenizer) find the copy
  # carried in third_party/testdata when the device has no ../shared beside it.
  if [ ! -e "$root/../shared/testdata" ] && [ -d "$root/third_party/testdata" ]; then
    mkdir -p "$root/../shared" && ln -s "$root/third_party/testdata" "$root/../shared/testdata"
  fi
  return 0 2>/dev/null || exit 0
fi
set -euo pipefail
mkdir -p "$root/third_party/xxhash" "$root/third_party/pcre2/include" "$root/third_party/pcre2/lib/pkgconfig"
cp /usr/include/xxhash.h "$root/third_party/xxhash/"
cp /usr/include/pcre2.h "$root/third_party/pcre2/include/"
cp /usr/lib/x86_64-linux-gnu/libpcre2-8.a "$root/third_party/pcre2/lib/"
# The LLaMA-3 tokenizer for the GPU tests that read ../shared/testdata (11 MB).
if [ -d "$root/../shared/testdata/llama3" ]; then
  mkdir -p "$root/third_party/testdata"
  cp -r "$root/../shared/testdata/llama3" "$root/third_party/testdata/"
fi
echo "device_prepare: third_party/ holds xxhash.h and PCRE2 ($(du -sh "$root/third_party" | cut -f1)); carry [\"third_party\"] (and \"data/janeaustenr\" for anything that trains on the embedded corpus)"
