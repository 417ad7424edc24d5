// paratune_backend_broken.so: a backend module whose dependency
// (libparatune_test_missing_dep.so) is not on any search path, to test the
// loader's "needs <library>: not found" message on a real dlopen failure.
extern "C" int paratune_test_missing_dep();
extern "C" __attribute__((visibility("default"))) int paratune_test_broken_module() {
  return paratune_test_missing_dep();
}
