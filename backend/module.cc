#include "backend/module.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#ifndef PARATUNE_VERSION
#define PARATUNE_VERSION "dev"
#endif

namespace paratune::backend {
namespace {

bool IsFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Directory of the running executable, "" when /proc/self/exe cannot be read.
std::string ExecutableDir() {
  std::string buf(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return "";
  buf.resize(static_cast<size_t>(n));
  const size_t slash = buf.rfind('/');
  return slash == std::string::npos ? "" : buf.substr(0, slash);
}

std::string BackendLabel(const std::string& module) {
  return module == "mpi" ? "mpi-cpu backend" : module + " backend";
}

}  // namespace

std::string ModuleFileName(const std::string& module) {
  return "paratune_backend_" + module + ".so";
}

std::vector<std::string> ModuleSearchDirs() {
  if (const char* env = std::getenv("PARATUNE_BACKEND_DIR"); env && *env) return {env};
  std::vector<std::string> dirs;
  if (std::string exe = ExecutableDir(); !exe.empty()) {
    dirs.push_back(exe);
    dirs.push_back(exe + "/../lib/paratune");
  }
#ifdef PARATUNE_BUILD_MODULE_DIR
  dirs.push_back(PARATUNE_BUILD_MODULE_DIR);
#endif
  return dirs;
}

std::string DescribeLoadFailure(const std::string& module, const std::string& path,
                                const std::string& dlerror_text) {
  // glibc: "<path of the object that needs it>: <missing>: cannot open shared
  // object file: No such file or directory", or "<missing>: cannot open ...".
  static constexpr const char* kCannotOpen = ": cannot open shared object file";
  const size_t at = dlerror_text.find(kCannotOpen);
  if (at != std::string::npos) {
    const size_t start = dlerror_text.rfind(": ", at == 0 ? 0 : at - 1);
    std::string missing = start == std::string::npos || start >= at
                              ? dlerror_text.substr(0, at)
                              : dlerror_text.substr(start + 2, at - start - 2);
    if (const size_t slash = missing.rfind('/'); slash != std::string::npos) {
      missing = missing.substr(slash + 1);
    }
    return "the " + BackendLabel(module) + " needs " + missing + ": not found (" + dlerror_text +
           ")";
  }
  return "the " + BackendLabel(module) + " module " + path + " cannot be loaded: " + dlerror_text;
}

Result<const ModuleApi*> LoadBackendModule(const std::string& module) {
  static std::mutex mu;
  static std::map<std::string, const ModuleApi*> loaded;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = loaded.find(module); it != loaded.end()) return it->second;

  const std::string file = ModuleFileName(module);
  std::string path, looked;
  for (const std::string& dir : ModuleSearchDirs()) {
    looked += (looked.empty() ? "" : ", ") + dir;
    if (IsFile(dir + "/" + file)) {
      path = dir + "/" + file;
      break;
    }
  }
  if (path.empty()) {
    return Status::Unavailable("the " + BackendLabel(module) + " module " + file +
                               " was not found (looked in " + looked +
                               "; set PARATUNE_BACKEND_DIR to the directory that holds it)");
  }
  // RTLD_GLOBAL: Open MPI opens its own components with dlopen and they
  // resolve libmpi's symbols from the global scope.
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!handle) {
    const char* e = ::dlerror();
    return Status::Unavailable(DescribeLoadFailure(module, path, e ? e : "unknown dlopen error"));
  }
  using Entry = const ModuleApi* (*)();
  auto entry = reinterpret_cast<Entry>(::dlsym(handle, kModuleEntrySymbol));
  if (!entry) {
    return Status::Unavailable("the " + BackendLabel(module) + " module " + path +
                               " has no entry point " + kModuleEntrySymbol +
                               ": it is not a paratune backend module");
  }
  const ModuleApi* api = entry();
  if (api == nullptr || api->abi_version != kModuleAbiVersion ||
      std::strcmp(api->paratune_version, PARATUNE_VERSION) != 0 ||
      std::strcmp(api->module, module.c_str()) != 0) {
    return Status::Unavailable(
        "the " + BackendLabel(module) + " module " + path + " was built for another paratune (" +
        (api ? std::string(api->paratune_version) + ", module ABI " +
                   std::to_string(api->abi_version)
             : std::string("no table")) +
        "; this is " + PARATUNE_VERSION + ", module ABI " + std::to_string(kModuleAbiVersion) +
        "): install the modules that came with this binary");
  }
  loaded[module] = api;
  return api;
}

}  // namespace paratune::backend
