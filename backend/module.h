// backend/module.h: the backends that need vendor libraries live in shared
// modules loaded at run time, so that planning needs none of those libraries.
//
//   paratune_backend_cuda.so  the cuda backend (CUDA runtime, cuBLAS, cuBLASLt, NCCL)
//   paratune_backend_mpi.so   the mpi-cpu backend and the MPI bootstrap (MPI)
//
// Each module exports one C symbol, kModuleEntrySymbol, returning a ModuleApi
// table. The core (factory.cc) opens a module with dlopen the first time one
// of its backends is asked for, and keeps it open for the life of the process
// (CUDA and MPI do not survive being unloaded). Modules are searched in:
//   $PARATUNE_BACKEND_DIR (when set, the only place looked in);
//   the directory of the running executable;
//   <that directory>/../lib/paratune (an installed tree or the package);
//   the build tree's module directory (tests run from the build tree).
// A module that is found but cannot be loaded reports the library it lacks:
// "the cuda backend needs libnccl.so.2: not found (<dlerror>)".
//
// Modules and the core are built together from one source tree: the table
// passes C++ types (Status, unique_ptr) across, and LoadBackendModule refuses
// a module built for another ABI version or paratune version.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/bootstrap.h"
#include "backend/cuda_nccl.h"
#include "backend/mpi_cpu.h"

namespace paratune::backend {

// Bumped whenever ModuleApi or a type it passes changes layout.
inline constexpr int kModuleAbiVersion = 1;
inline constexpr const char* kModuleEntrySymbol = "paratune_backend_module_v1";

// What a module provides; entries a module does not provide are null.
struct ModuleApi {
  int abi_version = kModuleAbiVersion;
  const char* paratune_version = "";  // PARATUNE_VERSION of the build that made it
  const char* module = "";            // "cuda" | "mpi"
  // mpi module.
  Result<std::unique_ptr<Backend>> (*create_mpi_cpu)(const MpiCpuOptions&) = nullptr;
  Result<std::unique_ptr<Bootstrap>> (*create_mpi_bootstrap)() = nullptr;
  // cuda module. REQUIRES: boot != nullptr.
  Result<std::unique_ptr<Backend>> (*create_cuda)(std::unique_ptr<Bootstrap> boot,
                                                  const CudaNcclOptions&) = nullptr;
  Result<int> (*cuda_device_count)() = nullptr;
};

// File name of module `module` ("cuda" → "paratune_backend_cuda.so").
std::string ModuleFileName(const std::string& module);

// The directories searched for modules, in order (see the header comment).
std::vector<std::string> ModuleSearchDirs();

// Opens module `module` ("cuda" | "mpi") once per process and returns its
// table (owned by the module, valid for the life of the process). kUnavailable
// with a message naming the module file and the directories looked in when it
// is absent, or naming the missing library when it is present but one of its
// dependencies is not. Thread-safe.
Result<const ModuleApi*> LoadBackendModule(const std::string& module);

// Defined by each module's entry source (cuda_module.cc, mpi_module.cc): its
// name and the entries it provides. The exported entry point (module_entry.cc)
// calls it once and stamps the table with this build's paratune version.
ModuleApi ModuleProvides();

// The dlerror() text of a failed dlopen turned into a sentence for `module`:
// "the cuda backend needs libnccl.so.2: not found (<text>)" when the text
// names a shared object that could not be opened, otherwise
// "the cuda backend module <path> cannot be loaded: <text>". Pure.
std::string DescribeLoadFailure(const std::string& module, const std::string& path,
                                const std::string& dlerror_text);

}  // namespace paratune::backend
