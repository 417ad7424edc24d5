#!/usr/bin/env bash
# Sets up (scripts/setup.sh, warnings as errors) and runs every test with CTest:
# unit, mpi (mpirun --oversubscribe -np 4 on loopback), gpu (skipped cleanly
# without a GPU) and browser (the web page in headless Chromium). Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
export PARATUNE_WERROR=${PARATUNE_WERROR:-ON}
# Debian's chromium runs the browser test of the web page (label browser), and
# python3 with Universal Ctags the check of the unity build's names
# (scripts/unity_names.py); they are only needed here, not to build or use
# paratune.
export PARATUNE_EXTRA_PACKAGES="${PARATUNE_EXTRA_PACKAGES:-} chromium python3 universal-ctags"
# Everything: the tests and benchmarks as well as paratune and its modules.
PARATUNE_BUILD_TARGETS=all scripts/setup.sh
# Open MPI refuses to run as root without these (CI runs as root).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
df -h . >&2  # a build that dies of a full disk is then recognisable as such
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure -j "$(nproc)" --timeout 300 "$@")

# The sanitizer tier: a CPU-only ASan + UBSan build (no CUDA, no MPI, no
# benchmarks) running the unit and CLI tests, the mutation fuzzer included;
# any report fails the run. PARATUNE_SANITIZER_TIER=0 skips it. Warnings are
# not errors here: GCC's flow warnings misfire under -fsanitize (boost::optional
# "used uninitialized"); the main build enforces them.
if [ "${PARATUNE_SANITIZER_TIER:-1}" = 1 ]; then
  ASAN_DIR=${ASAN_BUILD_DIR:-build-asan}
  if [ ! -f "$ASAN_DIR/build.ninja" ]; then
    # -g1: line tables are all a sanitizer report needs, at a fraction of the
    # disk. -O1, as the sanitizers' own documentation advises: reports stay
    # exact, and the instrumented build compiles in about two thirds of -O2's time.
    cmake -S . -B "$ASAN_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
          -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
          -DPARATUNE_SANITIZE=ON -DPARATUNE_ENABLE_CUDA=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON \
          -DPARATUNE_BUILD_BENCH=OFF -DPARATUNE_WERROR=OFF >&2
  fi
  cmake --build "$ASAN_DIR" -j "$(nproc)" >&2
  export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:abort_on_error=1
  export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  # Three accuracy tests refit the model once per held-out source, axis bin or
  # GPU split: the same fitter and predictor code ten to thirty times over,
  # 505 of the tier's 1,440 CPU-seconds. The main tier runs them; here the
  # single fits (Fit.RecoversAConstantFromRowsMadeWithIt, Validation.*) and
  # the fold splitting (Fit.HoldoutNames, Fit.AxisBins) run that code once
  # under the sanitizers.
  ASAN_SKIP='^Fit\.(LeaveOneSourceOut|LeaveOneAxisOutBinsPartitionTheRows|HeldOutGpuSplitsBySource)$'
  (cd "$ASAN_DIR" && ctest --output-on-failure -j "$(nproc)" --timeout 600 -L unit -E "$ASAN_SKIP")
fi
