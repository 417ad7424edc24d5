#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the main job: a dry-run plan of GPT-3 175B
# on 1024 GPUs of the built-in DGX A100 preset. Extra arguments go to `paratune plan`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec "${BUILD_DIR:-build}/cli/paratune" plan --model gpt3-175b --cluster dgx-a100-80gb \
  --gpus 1024 --global-batch 1536 --seq 2048 --format table "$@"
