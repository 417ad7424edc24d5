// tests/topology/test_util.h: small helpers shared by the topology tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "topology/cluster.h"
#include "topology/gpu.h"

namespace paratune::topology::testing {

// The preset `name` that `load` reads; aborts the test binary (with a gtest
// failure first, naming `what`) when it does not load, since every later
// expectation would be meaningless.
template <class Spec>
Spec MustLoad(const char* what, const std::string& name, Result<Spec> (*load)(const std::string&)) {
  Result<Spec> r = load(name);
  if (!r.ok()) {
    ADD_FAILURE() << what << " " << name << ": " << r.status().ToString();
    std::abort();
  }
  return *r;
}

inline ClusterSpec MustCluster(const std::string& name) {
  return MustLoad("cluster preset", name, &ClusterPreset);
}

inline GpuSpec MustGpu(const std::string& name) { return MustLoad("GPU preset", name, &GpuPreset); }

// The presets `listed` are exactly `expected`, and each of them loads through
// `load` under its own name and passes `check`.
template <class Spec>
void ExpectEveryPresetLoads(const std::vector<std::string>& listed,
                            const std::vector<std::string>& expected,
                            Result<Spec> (*load)(const std::string&),
                            const std::function<void(const std::string&, const Spec&)>& check) {
  EXPECT_EQ(listed, expected);
  for (const std::string& name : expected) {
    Result<Spec> spec = load(name);
    ASSERT_TRUE(spec.ok()) << name << ": " << spec.status().ToString();
    EXPECT_EQ(spec->name, name);
    check(name, *spec);
  }
}

// Loading the unknown preset `name` through `load` fails with kNotFound, and
// the message lists every preset of `known`.
template <class Spec>
void ExpectUnknownPresetListsTheKnown(const std::string& name,
                                      Result<Spec> (*load)(const std::string&),
                                      const std::vector<std::string>& known) {
  Result<Spec> spec = load(name);
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), StatusCode::kNotFound);
  for (const std::string& k : known) {
    EXPECT_NE(spec.status().message().find(k), std::string::npos) << k;
  }
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

// `j` with the value at `path` (object keys, array indices as decimal text)
// replaced by `value`.
inline Json SetAt(Json j, const std::vector<std::string>& path, const Json& value) {
  Json* at = &j;
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    at = at->is_array() ? &(*at)[std::stoul(path[i])] : &(*at)[path[i]];
  }
  if (at->is_array()) {
    (*at)[std::stoul(path.back())] = value;
  } else {
    (*at)[path.back()] = value;
  }
  return j;
}

// A range case's verdict: accepted when `expected` is empty, else refused as
// invalid input with `expected` in the message. `what` names the case.
inline void ExpectRangeVerdict(const Status& s, const std::string& what,
                               const std::string& expected) {
  if (expected.empty()) {
    EXPECT_TRUE(s.ok()) << what << ": " << s.ToString();
    return;
  }
  ASSERT_FALSE(s.ok()) << what;
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(expected), std::string::npos) << s.message();
}

}  // namespace paratune::topology::testing
