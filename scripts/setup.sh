#!/usr/bin/env bash
# Installs what paratune needs on Debian (12+) and builds it into build/:
# only `paratune` and the backend modules it opens at run time (building the
# executable builds them); scripts/test.sh builds the tests and benchmarks too.
# Idempotent and quick when nothing changed: packages already present are not
# re-installed, an existing build directory is reused, ninja rebuilds only what
# changed. Environment: BUILD_DIR (default build), PARATUNE_WERROR (default OFF;
# CI sets ON), PARATUNE_SKIP_APT=1 to skip the package step,
# PARATUNE_BUILD_TARGETS (default paratune; `all` for everything).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
PACKAGES=(g++ cmake ninja-build pkg-config
          nlohmann-json3-dev libboost-graph-dev libeigen3-dev
          libgtest-dev libgmock-dev libbenchmark-dev
          libopenmpi-dev openmpi-bin lld ${PARATUNE_EXTRA_PACKAGES:-})

if [ "${PARATUNE_SKIP_APT:-0}" != 1 ]; then
  missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}" >&2
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  fi
fi

# The CUDA toolkit is optional: when nvcc is at its standard prefix but not on
# PATH, use it so the GPU code is compiled (it runs only where a GPU exists).
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  # Line tables (-g1), not full debug info: backtraces and sanitizer reports
  # keep file and line, and the build takes a third less time and disk.
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
        -DPARATUNE_WERROR="${PARATUNE_WERROR:-OFF}" >&2
elif [ -n "${PARATUNE_WERROR:-}" ]; then
  cmake "$BUILD_DIR" -DPARATUNE_WERROR="$PARATUNE_WERROR" >/dev/null
fi
read -r -a targets <<<"${PARATUNE_BUILD_TARGETS:-paratune}"
cmake --build "$BUILD_DIR" -j "$(nproc)" --target "${targets[@]}" >&2
