# FP8 vs BF16 GEMMs and Transformer-Engine-style casts at the linear-layer shapes of
# tuned runs, on this GPU (cuBLASLt through torch). Prints one JSON document on
# stdout, one summary line per case on stderr. Needs a CUDA GPU with FP8
# (Hopper or later) and PyTorch; the figures in docs/model.md ("Measured on an
# H100") came from `python3 bench/gpu/fp8_linears.py` through scripts/gpu_pass.sh.
import json, sys, time, torch

torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda")
E4, E5 = torch.float8_e4m3fn, torch.float8_e5m2


def timeit(fn, iters=20, warm=5):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(iters):
        fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / iters / 1e3


def gemm_pair(m, n, k, bdtype=E4):
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
    tb = timeit(lambda: torch.matmul(a, w.t()))
    a8 = a.to(E4)
    w8 = w.to(bdtype)
    one = torch.ones((), device=dev, dtype=torch.float32)
    t8 = timeit(lambda: torch._scaled_mm(a8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
    fl = 2.0 * m * n * k
    return {"m": m, "n": n, "k": k, "bf16_tflops": fl / tb / 1e12, "fp8_tflops": fl / t8 / 1e12,
            "speedup": tb / t8}


# (name, T tokens, k, n) per linear: forward (T,n,k), dgrad (T,k,n), wgrad (n,k,T)
CASES = {
    "llama3-70b tp4 s8192": (8192, [(8192, 2560), (2048, 8192), (8192, 14336), (7168, 8192)]),
    "gpt3-175b tp4 s2048": (2048, [(12288, 9216), (3072, 12288), (12288, 12288), (12288, 12288)]),
    "llama3-8b tp1 s8192": (8192, [(4096, 6144), (4096, 4096), (4096, 28672), (14336, 4096)]),
}

out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cases": []}
for name, (T, lins) in CASES.items():
    rows = []
    tb_tot = t8_tot = fl_tot = 0.0
    for k, n in lins:
        for (m_, n_, k_, kind) in [(T, n, k, "fwd"), (T, k, n, "dgrad"), (n, k, T, "wgrad")]:
            r = gemm_pair(m_, n_, k_, E4 if kind == "fwd" else E5)
            r["kind"] = kind
            rows.append(r)
            fl = 2.0 * m_ * n_ * k_
            fl_tot += fl
            tb_tot += fl / (r["bf16_tflops"] * 1e12)
            t8_tot += fl / (r["fp8_tflops"] * 1e12)
    out["cases"].append({"case": name, "bf16_tflops": fl_tot / tb_tot / 1e12,
                         "fp8_tflops": fl_tot / t8_tot / 1e12, "speedup": tb_tot / t8_tot,
                         "gemms": rows})
    print(f"{name}: bf16 {fl_tot/tb_tot/1e12:.0f} fp8 {fl_tot/t8_tot/1e12:.0f} TFLOP/s speedup {tb_tot/t8_tot:.3f}",
          file=sys.stderr, flush=True)


# Current-scaling cast of a bf16 activation to FP8, row-wise and transposed (what TE's
# cast-transpose writes for the fprop and wgrad GEMMs), compiled into fused kernels.
def cast_t(x):
    amax = x.abs().amax().float()
    scale = 448.0 / torch.clamp(amax, min=1e-12)
    y = (x.float() * scale).to(E4)
    yt = (x.t().float() * scale).to(E4).contiguous()
    return y, yt, scale


copy_src = torch.empty(1 << 30, device=dev, dtype=torch.uint8)
copy_dst = torch.empty_like(copy_src)
t_copy = timeit(lambda: copy_dst.copy_(copy_src))
hbm = 2.0 * copy_src.numel() / t_copy / 1e9
out["copy_GBps"] = hbm
casts = []
try:
    cc = torch.compile(cast_t, dynamic=False)
    for (m, k) in [(8192, 8192), (8192, 14336)]:
        x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        t0 = time.time()
        cc(x)
        torch.cuda.synchronize()
        tcomp = time.time() - t0
        t = timeit(lambda: cc(x))
        te = timeit(lambda: cast_t(x))
        el = m * k
        casts.append({"m": m, "k": k, "compiled_s": t, "eager_s": te, "compile_wall_s": tcomp,
                      "bytes_per_element_at_copy_rate": t * hbm * 1e9 / el,
                      "eager_bytes_per_element_at_copy_rate": te * hbm * 1e9 / el})
        print(f"cast {m}x{k}: compiled {t*1e6:.0f} us = {t*hbm*1e9/el:.2f} B/elem at copy rate; eager {te*hbm*1e9/el:.2f}",
              file=sys.stderr, flush=True)
except Exception as ex:  # report, keep the GEMM figures
    out["cast_error"] = repr(ex)
out["casts"] = casts
print(json.dumps(out, indent=1))
