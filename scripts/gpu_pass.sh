#!/bin/bash
# A GPU pass on a lent machine that has CUDA 13, NCCL and PyTorch but none of
# this project's -dev packages (docs/executor.md, section 6).
#
#   bash scripts/gpu_pass.sh package   # here, after scripts/setup.sh built build/
#   bash .gpu-deps/run.sh              # there (the folder is git-ignored: carry it)
#
# `package` strips paratune, its backend modules and the GPU test programs into
# .gpu-deps/ with the Open MPI, libevent and hwloc libraries they link (the CUDA,
# cuBLAS and NCCL libraries are the machine's), six plans made here (four
# transformers, the SD 2 U-Net and the 3D U-Net), the GPU
# benchmarks of bench/gpu/ and run.sh. run.sh runs the GPU test tier, a full
# `paratune profile --backend cuda`, `paratune confirm` of those plans on the
# one GPU, the FP8 benchmark and a sustained GEMM load, and leaves everything in
# $OUT (or /tmp/gpu-pass).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${1:-}" = package ] || { sed -n 2,14p "$0"; exit 2; }
B=${PARATUNE_BUILD_DIR:-build}
D=.gpu-deps
for f in "$B/cli/paratune" "$B/lib/paratune/paratune_backend_cuda.so"; do
  [ -f "$f" ] || { echo "gpu_pass: $f missing: build with scripts/setup.sh first" >&2; exit 1; }
done
rm -rf "$D" && mkdir -p "$D/lib"
cp "$B/cli/paratune" "$B"/lib/paratune/paratune_backend_*.so "$B"/tests/*/*gpu_test "$D/"
strip "$D/paratune" "$D"/*.so "$D"/*gpu_test
for l in $(ldd "$D/paratune" "$D"/*.so "$D"/*gpu_test | awk '/=>/ {print $3}' | sort -u); do
  case "$(basename "$l")" in
    libmpi*|libopen-pal*|libopen-rte*|libevent*|libhwloc*) cp -L "$l" "$D/lib/" ;;
  esac
done
P="$D/paratune"
export PARATUNE_BACKEND_DIR="$D"
"$P" plan --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 64 --seq 8192 \
  --format json > "$D/plans_llama8b.json"
"$P" plan --model llama3-70b --cluster dgx-h100 --gpus 64 --global-batch 128 --seq 8192 \
  --precision fp8 --format json > "$D/plans_llama70b_fp8.json"
"$P" plan --model qwen3-30b-a3b --cluster dgx-h100 --gpus 16 --global-batch 128 --seq 4096 \
  --format json > "$D/plans_qwen30b.json"
"$P" plan --model deepseek-v3 --cluster dgx-h100 --gpus 1024 --format json > "$D/plans_dsv3.json"
# Networks: their layers through the lowered convolution and cuBLAS.
"$P" plan --network sd2-unet --cluster dgx-h100 --gpus 8 --global-batch 256 --format json \
  > "$D/plans_sd2unet.json"
"$P" plan --network unet3d-kits19 --cluster dgx-h100 --gpus 8 --global-batch 56 --format json \
  > "$D/plans_unet3d.json"
cp bench/gpu/*.py "$D/"
cat > "$D/run.sh" <<'RUN'
#!/bin/bash
cd "$(dirname "$0")"; H=$PWD; O=${OUT:-/tmp/gpu-pass}; mkdir -p "$O"
CU=$(dirname "$(find /usr/local/cuda/ /usr /opt -name 'libcublas.so.13' 2>/dev/null | head -1)")
NC=$(dirname "$(find /usr /opt -name 'libnccl.so.2' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$H/lib:$CU:$NC:${LD_LIBRARY_PATH:-}
export PARATUNE_BACKEND_DIR=$H PARATUNE_CACHE_DIR=/tmp/ptcache
L=$O/log.txt
{ date; nvidia-smi; ldd ./paratune_backend_cuda.so | grep -E "not found|nccl|cublas"; } > "$L" 2>&1
for t in backend_gpu_test profiler_gpu_test executor_gpu_test; do
  echo "=== $t" >> "$L"; timeout 150 "./$t" >> "$L" 2>&1; echo "rc=$?" >> "$L"; done
echo "=== profile" >> "$L"
timeout 200 ./paratune profile --backend cuda --no-cache --out "$O/profile.json" \
  --report "$O/profile_report.txt" --cluster dgx-h100 >> "$L" 2>&1; echo "rc=$?" >> "$L"
for p in llama8b llama70b_fp8 qwen30b dsv3 sd2unet unet3d; do
  echo "=== confirm $p" >> "$L"
  timeout 120 ./paratune confirm --plans "plans_$p.json" --top 2 --backend cuda \
    --out "$O/confirm_$p.json" >> "$L" 2>&1; echo "rc=$?" >> "$L"; done
echo "=== fp8_linears" >> "$L"
timeout 150 python3 fp8_linears.py > "$O/fp8.json" 2>> "$L"; echo "rc=$?" >> "$L"
echo "=== sustained_gemm" >> "$L"
timeout 60 python3 sustained_gemm.py 40 >> "$L" 2>&1; echo "rc=$?" >> "$L"
date >> "$L"
tail -c 6000 "$L"
RUN
chmod +x "$D/run.sh"
du -sh "$D"
