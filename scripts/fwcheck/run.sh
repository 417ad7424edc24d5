#!/usr/bin/env bash
# Developer check: feeds emitted plans to the frameworks' own code.
#   MEGATRON_LM=<Megatron-LM checkout @ d98e8a6> TORCHTITAN=<torchtitan checkout @ b5bcd76> \
#   MEGATRON_BRIDGE=<Megatron-Bridge checkout @ 067f987> BRIDGE_MEGATRON_LM=<Megatron-LM @ 2a75ac1> \
#     scripts/fwcheck/run.sh DIR
# DIR holds the files tests/frameworks/start_test.cc writes with
# PARATUNE_EMIT_DUMP=DIR (NAME.megatron.sh, NAME.torchtitan.py, each with
# NAME.sidecar.json; tests/frameworks/bridge_test.cc writes NAME.megatron-bridge.py
# the same way). Needs python3 with torch (Debian's python3-torch 1.13
# will do), packaging and pydantic; every other package Megatron-LM or
# torchtitan imports is replaced by an empty stand-in (stubs.py). Prints
# ACCEPT / REJECT per file; exit 1 if any is rejected. PYTHON picks the
# interpreter (default python3).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:?usage: run.sh DIR}
status=0
if [ -n "${MEGATRON_LM:-}" ]; then
  PYTHONPATH="$here:$MEGATRON_LM" "${PYTHON:-python3}" -W ignore "$here/check_megatron.py" "$dir" || status=1
fi
if [ -n "${TORCHTITAN:-}" ]; then
  PYTHONPATH="$here:$TORCHTITAN" "${PYTHON:-python3}" -W ignore "$here/check_torchtitan.py" "$dir" || status=1
fi
if [ -n "${MEGATRON_BRIDGE:-}" ]; then
  # Bridge runs on the Megatron-LM it pins (its 3rdparty/Megatron-LM, 2a75ac1).
  PYTHONPATH="$here:${BRIDGE_MEGATRON_LM:?the Megatron-LM commit Megatron-Bridge pins}:$MEGATRON_BRIDGE/src" \
    "${PYTHON:-python3}" -W ignore "$here/check_bridge.py" "$dir" || status=1
fi
exit $status
