// libFuzzer entry for one document kind (PARATUNE_FUZZ_DOCUMENT, set per
// target in CMake): `fuzz_<document> corpus/ -max_total_time=60`. Built only
// with clang and -DPARATUNE_BUILD_FUZZERS=ON. A contract violation (see
// documents.h) aborts, so libFuzzer saves the input as a crash.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "documents.h"

namespace {

paratune::fuzz::Harness& TheHarness() {
  static paratune::fuzz::Harness* h = [] {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("paratune_libfuzzer_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    return new paratune::fuzz::Harness(PARATUNE_SOURCE_DIR, dir.string());
  }();
  return *h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const auto v = TheHarness().Run(paratune::fuzz::Document::PARATUNE_FUZZ_DOCUMENT, input);
  if (!v.violation.empty()) {
    std::fprintf(stderr, "contract violation: %s\n%s\n", v.violation.c_str(), v.err.c_str());
    std::abort();
  }
  return 0;
}
