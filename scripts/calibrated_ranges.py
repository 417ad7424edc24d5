#!/usr/bin/env python3
"""Prints the rows of kCalibratedCells (frameworks/log_ranges.cc): per
framework family x GPU generation, the number of published runs and the
range of their GPU counts, sequence lengths and model sizes, from the
calibration data `paratune validate` checks the model on.

usage: scripts/calibrated_ranges.py [SHARED_DIR]   (default ../shared)
"""
import collections
import json
import os
import sys

FILES = ["public_runs.json", "korthikanti2022.json", "fleet_runs.json", "moe_runs.json"]
# The row's GPU as printed -> paratune's GPU preset name up to its first '-'.
GENERATIONS = ["GB300", "GB200", "B300", "B200", "H200", "H800", "H100", "A100",
               "MI355X", "MI350X", "MI325X", "MI300X", "V100"]


def generation(gpu):
    for g in GENERATIONS:
        if g in gpu.upper():
            return g.lower()
    raise SystemExit("unknown GPU " + gpu)


def main():
    shared = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "shared")
    cells = collections.defaultdict(list)
    for name in FILES:
        for row in json.load(open(os.path.join(shared, "calibration", name))):
            hw, model = row.get("hardware", {}), row.get("model", {})
            source = row.get("framework") or row.get("source")
            source = json.dumps(source) if isinstance(source, dict) else str(source)
            family = "fsdp" if "llm-foundry" in source else "megatron"
            gpus = hw.get("num_gpus")
            seq = model.get("seq_len") or row.get("seq_len")
            params = model.get("params_B") or model.get("total_params_B")
            if not (gpus and seq and params):
                continue
            cells[(family, generation(hw["gpu"]))].append((gpus, seq, params))
    for (family, gen), rows in sorted(cells.items()):
        g = [r[0] for r in rows]
        s = [r[1] for r in rows]
        p = [r[2] for r in rows]
        print('    {"%s", "%s", %d, %d, %d, %d, %d, %g, %g},' %
              (family, gen, len(rows), min(g), max(g), min(s), max(s), min(p), max(p)))


if __name__ == "__main__":
    main()
