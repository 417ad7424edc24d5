// The exported entry point of every backend module (backend/module.h): the
// ABI and paratune versions of this build, and what the module itself
// provides (ModuleProvides, from the module's own entry source).
#include "backend/module.h"

#ifndef PARATUNE_VERSION
#define PARATUNE_VERSION "dev"
#endif

extern "C" __attribute__((visibility("default"))) const paratune::backend::ModuleApi*
paratune_backend_module_v1() {
  static const paratune::backend::ModuleApi api = [] {
    paratune::backend::ModuleApi a = paratune::backend::ModuleProvides();
    a.paratune_version = PARATUNE_VERSION;
    return a;
  }();
  return &api;
}
