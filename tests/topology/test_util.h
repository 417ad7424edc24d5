// tests/topology/test_util.h: small helpers shared by the topology tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "topology/cluster.h"
#include "topology/gpu.h"

namespace paratune::topology::testing {

// The named preset; aborts the test binary (with a gtest failure first) when it
// does not load, since every later expectation would be meaningless.
inline ClusterSpec MustCluster(const std::string& name) {
  Result<ClusterSpec> r = ClusterPreset(name);
  if (!r.ok()) {
    ADD_FAILURE() << "cluster preset " << name << ": " << r.status().ToString();
    std::abort();
  }
  return *r;
}

inline GpuSpec MustGpu(const std::string& name) {
  Result<GpuSpec> r = GpuPreset(name);
  if (!r.ok()) {
    ADD_FAILURE() << "GPU preset " << name << ": " << r.status().ToString();
    std::abort();
  }
  return *r;
}

// Every one of the `count` values of E prints a name (`name`) that `parse`
// reads back as that value.
template <class E, class Name, class Parse>
void ExpectNamesRoundTrip(int count, Name name, Parse parse) {
  for (int i = 0; i < count; ++i) {
    const E v = static_cast<E>(i);
    Result<E> back = parse(name(v));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, v);
  }
}

inline Json MustParse(const std::string& text) {
  Result<Json> r = ParseJson(text, "test");
  if (!r.ok()) {
    ADD_FAILURE() << r.status().ToString();
    std::abort();
  }
  return *r;
}

}  // namespace paratune::topology::testing
