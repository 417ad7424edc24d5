# Install-time script (cmake/Package.cmake): copies into <prefix>/lib every
# shared library bin/paratune and the backend modules need that is neither
# the base C/C++ runtime nor part of the CUDA driver, toolkit or NCCL.
# Inputs: PARATUNE_BUNDLE_MODULES (module file names in lib/paratune),
# PARATUNE_BUNDLE_DIRS (extra directories to resolve in: the CUDA libraries).
set(root "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")
set(modules "")
foreach(m ${PARATUNE_BUNDLE_MODULES})
  list(APPEND modules "${root}/lib/paratune/${m}")
endforeach()
file(GET_RUNTIME_DEPENDENCIES
  EXECUTABLES "${root}/bin/paratune"
  MODULES ${modules}
  RESOLVED_DEPENDENCIES_VAR resolved
  UNRESOLVED_DEPENDENCIES_VAR unresolved
  DIRECTORIES ${PARATUNE_BUNDLE_DIRS}
  PRE_EXCLUDE_REGEXES
    # The base C/C++ runtime: every Linux has it.
    "^(ld-linux|linux-vdso|libc|libm|libdl|libpthread|librt|libutil|libresolv|libstdc\\+\\+|libgcc_s)[.-]"
    # The CUDA driver, toolkit and NCCL: the GPU node's own, matched to its driver.
    "^lib(cuda|cudart|cublas|cublasLt|nccl|nvidia-ml|nvrtc|nvJitLink)[.]")
foreach(lib ${resolved})
  message(STATUS "paratune package: bundling ${lib}")
  file(INSTALL "${lib}" DESTINATION "${root}/lib" FOLLOW_SYMLINK_CHAIN)
endforeach()
foreach(lib ${unresolved})
  message(WARNING "paratune package: ${lib} not found here; the target machine must provide it")
endforeach()
