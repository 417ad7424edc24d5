#!/usr/bin/env bash
# Sets up (scripts/setup.sh, warnings as errors) and runs every test with CTest:
# unit, mpi (mpirun --oversubscribe -np 4 on loopback), gpu (skipped cleanly
# without a GPU) and browser (the web page in headless Chromium). Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
export PARATUNE_WERROR=${PARATUNE_WERROR:-ON}
# Debian's chromium runs the browser test of the web page (label browser); it
# is only needed here, not to build or use paratune.
export PARATUNE_EXTRA_PACKAGES="${PARATUNE_EXTRA_PACKAGES:-} chromium"
scripts/setup.sh
# Open MPI refuses to run as root without these (CI runs as root).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)" --timeout 300 "$@"
