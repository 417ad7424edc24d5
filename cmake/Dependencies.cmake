# Third-party dependencies. Required: nlohmann/json, Boost.Graph (headers),
# Eigen, cpp-httplib (vendored, web/). Optional: MPI (MPI backend), CUDA +
# cuBLAS + NCCL (GPU backend). Each optional part announces what it found.
find_package(nlohmann_json 3.10 REQUIRED)
find_package(Boost 1.74 REQUIRED)            # Boost.Graph is header-only
find_package(Eigen3 3.3 REQUIRED NO_MODULE)
find_package(Threads REQUIRED)

# cpp-httplib, header-only, from third_party/cpp-httplib (its README says which
# version and patch). Without its OpenSSL, zlib and brotli switches: the
# binary then links nothing beyond the C/C++ runtime, TLS is left to a reverse
# proxy and compressed request bodies are refused (415). The include directory
# comes before the system's, so a distribution's split httplib.h (declarations
# for a compiled libcpp-httplib) is never picked up instead.
add_library(paratune_httplib INTERFACE)
target_include_directories(paratune_httplib SYSTEM BEFORE INTERFACE
                           ${PROJECT_SOURCE_DIR}/third_party/cpp-httplib)
target_link_libraries(paratune_httplib INTERFACE Threads::Threads)
set(PARATUNE_HAVE_HTTPLIB ON)

find_package(MPI COMPONENTS CXX)
set(PARATUNE_HAVE_MPI ${MPI_CXX_FOUND})

# CUDA is an optional language: compiled whenever nvcc exists (CI has it, with
# no GPU), so GPU code never rots; tests skip at run time without a device.
option(PARATUNE_ENABLE_CUDA "Build the CUDA/NCCL backend when nvcc is found" ON)
include(CheckLanguage)
set(PARATUNE_HAVE_CUDA OFF)
if(PARATUNE_ENABLE_CUDA)
  check_language(CUDA)
endif()
if(PARATUNE_ENABLE_CUDA AND CMAKE_CUDA_COMPILER)
  # One CUDA runtime: the shared one (cuBLAS and NCCL link it too).
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  enable_language(CUDA)
  find_package(CUDAToolkit)
  if(CUDAToolkit_FOUND)
    set(PARATUNE_HAVE_CUDA ON)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "52")
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
  endif()
endif()

# NCCL as an imported target, found beside the CUDA toolkit or under NCCL_HOME.
set(PARATUNE_HAVE_NCCL OFF)
if(PARATUNE_HAVE_CUDA)
  find_path(NCCL_INCLUDE_DIR nccl.h
    HINTS $ENV{NCCL_HOME} ${NCCL_HOME} ${CUDAToolkit_INCLUDE_DIRS}
    PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl
    HINTS $ENV{NCCL_HOME} ${NCCL_HOME} ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
    PATH_SUFFIXES lib lib64)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    add_library(NCCL::nccl UNKNOWN IMPORTED)
    set_target_properties(NCCL::nccl PROPERTIES
      IMPORTED_LOCATION ${NCCL_LIBRARY}
      INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR})
    set(PARATUNE_HAVE_NCCL ON)
  endif()
endif()

message(STATUS "paratune: httplib=${PARATUNE_HAVE_HTTPLIB} mpi=${PARATUNE_HAVE_MPI} "
               "cuda=${PARATUNE_HAVE_CUDA} nccl=${PARATUNE_HAVE_NCCL}")
