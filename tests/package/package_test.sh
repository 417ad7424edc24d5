#!/usr/bin/env bash
# The relocatable package: builds it with CPack, unpacks it in a
# temporary directory and checks, from there, that
#  - every library bin/paratune and the mpi module load resolves inside the
#    package or to the base system (ldd: nothing "not found"), and the cuda
#    module lacks only the CUDA/NCCL libraries a GPU node provides;
#  - bin/paratune needs nothing beyond glibc (libc, libm, the loader and, on
#    older glibc, its split-off libpthread/libdl/librt), libstdc++ and libgcc,
#    and no glibc newer than the README states (its GLIBC_ symbol versions);
#  - `paratune version` and a `plan` on a preset run, with a clean environment;
#  - the mpi-cpu backend module is found beside the binary (../lib/paratune).
# Usage: package_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
cmake --build "$build" --target package >/dev/null
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
tarball="$build/paratune-$version-Linux-x86_64.tar.gz"
[ -f "$tarball" ] || { echo "FAIL: $tarball was not made"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$tarball" -C "$tmp"
root="$tmp/paratune-$version-Linux-x86_64"
[ -x "$root/bin/paratune" ] || { echo "FAIL: no bin/paratune in the package"; exit 1; }
fail=0
# A library resolves acceptably when it is inside the package or in the base system.
check_ldd() {  # FILE ALLOWED_MISSING_REGEX
  local file=$1 allowed=$2
  while read -r line; do
    case "$line" in
      *"not found"*)
        lib=${line%% *}
        if [ -n "$allowed" ] && [[ "$lib" =~ $allowed ]]; then continue; fi
        echo "FAIL: $file: $lib not found"; fail=1 ;;
      *"=> "*)
        path=${line#*=> }; path=${path%% (*}
        case "$path" in
          "$root"/*|/lib/*|/lib64/*|/usr/lib/*|/usr/lib64/*) ;;
          *) if [ -n "$allowed" ] && [[ "$(basename "$path")" =~ $allowed ]]; then continue; fi
             echo "FAIL: $file: ${line%% *} resolves outside the package and the base system: $path"
             fail=1 ;;
        esac ;;
    esac
  done < <(env -i PATH=/usr/bin:/bin ldd "$file")
}
check_ldd "$root/bin/paratune" ""
# Every library bin/paratune needs, by name: the C/C++ runtime only.
runtime='^(linux-vdso[.]so[.]1|/lib(64)?/ld-linux-x86-64[.]so[.]2|lib(c|m|pthread|dl|rt)[.]so[.][0-9]+|libstdc[+][+][.]so[.]6|libgcc_s[.]so[.]1)$'
needed=$(env -i PATH=/usr/bin:/bin ldd "$root/bin/paratune" | awk '{print $1}')
[ -n "$needed" ] || { echo "FAIL: ldd printed nothing for bin/paratune"; fail=1; }
for lib in $needed; do
  [[ "$lib" =~ $runtime ]] || { echo "FAIL: bin/paratune needs $lib (only glibc, libstdc++, libgcc and libm are allowed)"; fail=1; }
done
# The newest glibc symbol version it needs is at most the one the README names.
glibc_need=$(objdump -T "$root/bin/paratune" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
glibc_claim=$(grep -o 'glibc [0-9]*[.][0-9]* or newer' "$src/README.md" | head -1 | awk '{print $2}')
if [ -z "$glibc_need" ] || [ -z "$glibc_claim" ]; then
  echo "FAIL: glibc needed '$glibc_need', README states '$glibc_claim' (want 'glibc X.Y or newer')"; fail=1
elif [ "$(printf '%s\n%s\n' "$glibc_need" "$glibc_claim" | sort -V | tail -1)" != "$glibc_claim" ]; then
  echo "FAIL: bin/paratune needs glibc $glibc_need, the README says $glibc_claim"; fail=1
fi
cuda_libs='^lib(cudart|cublas|cublasLt|nccl|cuda|nvidia-ml)[.]'
for m in "$root"/lib/paratune/*.so; do
  case "$m" in
    */paratune_backend_cuda.so) check_ldd "$m" "$cuda_libs" ;;
    *) check_ldd "$m" "" ;;
  esac
done
if [ -f "$build/lib/paratune/paratune_backend_mpi.so" ]; then
  ls "$root"/lib/libmpi.so* >/dev/null 2>&1 || { echo "FAIL: Open MPI's libmpi is not bundled"; fail=1; }
fi
out=$(env -i PATH=/usr/bin:/bin "$root/bin/paratune" version)
[ "$out" = "paratune $version" ] || { echo "FAIL: version printed '$out'"; fail=1; }
plan=$(env -i PATH=/usr/bin:/bin HOME="$tmp" "$root/bin/paratune" plan --model gpt3-1.3b \
       --cluster dgx-h100 --gpus 8 --global-batch 64 --top 1) \
  || { echo "FAIL: plan exited $?"; fail=1; }
grep -qE "^ *1[~ ]" <<<"$plan" || { echo "FAIL: plan printed no ranked candidate:"; echo "$plan"; fail=1; }
if [ -f "$root/lib/paratune/paratune_backend_mpi.so" ]; then
  # The module is found beside the binary: a missing one would say "not found (looked in".
  err=$(env -i PATH=/usr/bin:/bin HOME="$tmp" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        timeout 120 "$root/bin/paratune" profile --backend mpi-cpu --quick --no-gemm \
        --collectives all_reduce --no-cache --out "$tmp/p.json" 2>&1) || true
  if grep -q "was not found (looked in\|needs .*: not found" <<<"$err"; then
    echo "FAIL: the packaged binary cannot load its mpi module: $err"; fail=1
  fi
fi
[ $fail = 0 ] && echo "package OK: $(tar -tzf "$tarball" | grep -c .) entries in $(basename "$tarball");" \
  "bin/paratune needs" $needed "(glibc $glibc_need)"
exit $fail
