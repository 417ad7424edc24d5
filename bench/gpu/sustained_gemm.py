# A sustained bf16 GEMM load (8192^3, back to back) for ~40 s: achieved TFLOP/s per
# 4 s window beside the SM clock, power and temperature nvidia-smi reads at its end
# (one JSON line per window). Usage: python3 bench/gpu/sustained_gemm.py [SECONDS];
# the docs/model.md figures ("Measured on an H100") came from a 40 s run.
import json, subprocess, sys, time, torch
dev = torch.device("cuda")
a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
fl = 2.0 * 8192 ** 3
rows = []
t_start = time.time()
t_end = t_start + float(sys.argv[1] if len(sys.argv) > 1 else 40)
while time.time() < t_end:
    torch.cuda.synchronize(); t0 = time.time(); n = 0
    while time.time() - t0 < 4.0:
        for _ in range(20):
            torch.matmul(a, b)
        n += 20
        torch.cuda.synchronize()
    dt = time.time() - t0
    q = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active",
                        "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout.strip()
    rows.append({"t": round(time.time() - t_start, 1), "tflops": fl * n / dt / 1e12, "smi": q})
    print(json.dumps(rows[-1]), flush=True)
