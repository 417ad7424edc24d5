// Helpers shared by the profiler tests: fixture paths, a portable seeded
// noise source (std::normal_distribution differs between standard libraries),
// and scratch directories.
#pragma once

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>

namespace paratune::profiler::testing {

inline std::string DataPath(const std::string& name) {
  return std::string(PARATUNE_SOURCE_DIR) + "/tests/profiler/data/" + name;
}

// SplitMix64 + Box–Muller: the same numbers on every platform.
class Noise {
 public:
  explicit Noise(uint64_t seed) : state_(seed) {}
  double Uniform() {  // (0, 1)
    uint64_t x = (state_ += 0x9E3779B97F4A7C15ull);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    return (static_cast<double>(x >> 11) + 0.5) / 9007199254740992.0;
  }
  double Normal() {
    const double u = Uniform(), v = Uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
  }
  // exp(sigma·N(0,1)): multiplicative noise of relative size ≈ sigma.
  double Factor(double sigma) { return std::exp(sigma * Normal()); }

 private:
  uint64_t state_;
};

// A fresh empty directory under the system temp dir, unique to this process
// (CTest runs tests in parallel), removed by the caller's TearDown.
inline std::string ScratchDir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("paratune_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace paratune::profiler::testing
