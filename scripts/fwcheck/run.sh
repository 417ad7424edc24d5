#!/usr/bin/env bash
# Developer check: feeds emitted plans to the frameworks' own code and prints
# the start table (how many of the ranked plans each framework would start).
#   MEGATRON_LM=<Megatron-LM checkout @ d98e8a6> TORCHTITAN=<torchtitan @ b5bcd76> \
#   MEGATRON_BRIDGE=<Megatron-Bridge @ 067f987> BRIDGE_MEGATRON_LM=<Megatron-LM @ 2a75ac1> \
#   DEEPSPEED=<DeepSpeed @ edaa722> MEGATRON_DEEPSPEED=<Megatron-DeepSpeed @ 4efb479> \
#   AXONN=<AxoNN @ 660a224> \
#     scripts/fwcheck/run.sh DIR
# DIR holds the files tests/frameworks/start_test.cc writes with
# PARATUNE_EMIT_DUMP=DIR: the top 10 plans of its 15 requests in every
# framework that ranks them (NAME.megatron.sh with NAME.megatron-bridge.py,
# NAME.megatron-deepspeed.sh, NAME.ds_config.json, NAME.torchtitan.py,
# NAME.axonn.py, each with NAME.sidecar.json); when DIR does not exist, run.sh
# writes it with $BUILD/tests/frameworks/frameworks_start_test (BUILD defaults
# to build). A framework whose checkout is not named is skipped.
#
# Interpreters: PYTHON (default python3) needs torch (Debian's python3-torch
# 1.13 will do), packaging and pydantic; every other package the frameworks
# import is replaced by an empty stand-in (stubs.py). DeepSpeed 0.19 needs
# pydantic 2, which Debian 12 does not package: DS_PYTHON names a Python
# that has it, and DS_PYTHONPATH is put before the checkouts on its path (a
# folder linking Debian's torch, numpy, sympy and mpmath into it works).
# The DeepSpeed and AxoNN checks read the model's shape from PARATUNE
# (default $BUILD/cli/paratune presets show).
#
# Prints ACCEPT / REJECT per file, each check's summary and the table; exit 1
# if any file is rejected.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:?usage: run.sh DIR}
build=${BUILD:-build}
PARATUNE=${PARATUNE:-$build/cli/paratune}
case $PARATUNE in /*) ;; *) PARATUNE=$PWD/$PARATUNE ;; esac  # the DeepSpeed check runs elsewhere
export PARATUNE
if [ ! -e "$dir" ]; then
  PARATUNE_EMIT_DUMP="$dir" "$build/tests/frameworks/frameworks_start_test" \
    --gtest_filter=FrameworksStart.EveryRankedPlanStartsInItsFramework > /dev/null
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
py=${PYTHON:-python3}
ds_py=${DS_PYTHON:-$py}
status=0
run() {  # run LABEL PYTHONPATH INTERPRETER SCRIPT [cwd]
  local out err
  out=$(mktemp) err=$(mktemp)
  (cd "${5:-.}" && PYTHONPATH="$2" "$3" -W ignore "$here/$4" "$dir") > "$out" 2> "$err" || true
  grep -E '^(ACCEPT|REJECT|NOT RUN) |^[a-z-]+: [0-9]+ accepted' "$out" | tee -a "$log" || true
  if ! grep -qE '^[a-z-]+: [0-9]+ accepted' "$out"; then
    echo "$1: the check did not run to its summary:" >&2
    tail -5 "$err" >&2
    status=1
  fi
  rm -f "$out" "$err"
}
dir=$(cd "$dir" && pwd)
# Absolute checkouts: the DeepSpeed check runs from inside its checkout.
for v in MEGATRON_LM TORCHTITAN MEGATRON_BRIDGE BRIDGE_MEGATRON_LM DEEPSPEED MEGATRON_DEEPSPEED AXONN; do
  if [ -n "${!v:-}" ]; then printf -v "$v" '%s' "$(cd "${!v}" && pwd)"; fi
done
if [ -n "${MEGATRON_LM:-}" ]; then
  run megatron "$here:$MEGATRON_LM" "$py" check_megatron.py
fi
if [ -n "${TORCHTITAN:-}" ]; then
  run torchtitan "$here:$TORCHTITAN" "$py" check_torchtitan.py
fi
if [ -n "${MEGATRON_BRIDGE:-}" ]; then
  # Bridge runs on the Megatron-LM it pins (its 3rdparty/Megatron-LM, 2a75ac1).
  run bridge "$here:${BRIDGE_MEGATRON_LM:?the Megatron-LM commit Megatron-Bridge pins}:$MEGATRON_BRIDGE/src" \
    "$py" check_bridge.py
fi
if [ -n "${DEEPSPEED:-}" ]; then
  # Run from the DeepSpeed checkout: DeepSpeed reads its version from ./version.txt.
  run deepspeed "$here:${DS_PYTHONPATH:+$DS_PYTHONPATH:}$DEEPSPEED:${MEGATRON_DEEPSPEED:?Megatron-DeepSpeed checks run with DeepSpeed}" \
    "$ds_py" check_deepspeed.py "$DEEPSPEED"
fi
if [ -n "${AXONN:-}" ]; then
  run axonn "$here:$AXONN" "$py" check_axonn.py
fi
echo
python3 "$here/table.py" "$log" || status=1
exit $status
