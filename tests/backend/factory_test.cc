// CreateBackend: names, fault wrapping, and backends whose runtime is missing
// failing with kUnavailable and a reason rather than crashing.
#include "backend/factory.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace paratune::backend {
namespace {

TEST(Factory, MakesTheFakeAndWrapsFaults) {
  BackendOptions o;
  o.name = "fake";
  o.fake.world_size = 8;  // forced to one rank: nothing else could answer its collectives
  auto b = CreateBackend(o);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ((*b)->name(), "fake");
  EXPECT_EQ((*b)->world_size(), 1);
  o.fault = FaultPlan{FaultKind::kOutOfMemory, 1, -1};
  auto f = CreateBackend(o);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)->name(), "fault(fake)");
  EXPECT_TRUE(IsOutOfMemory((*f)->Allocate(8).status()));
}

TEST(Factory, UnknownNameIsInvalid) {
  BackendOptions o;
  o.name = "tpu";
  EXPECT_EQ(CreateBackend(o).status().code(), StatusCode::kInvalidArgument);
}

TEST(Factory, ListsWhatThisBuildCompiled) {
  const auto names = CompiledBackends();
  EXPECT_NE(std::find(names.begin(), names.end(), "fake"), names.end());
}

TEST(Factory, CudaWithoutADeviceIsUnavailableNotACrash) {
  BackendOptions o;
  o.name = "cuda";
  o.cuda_use_mpi = false;
  auto b = CreateBackend(o);
  const auto names = CompiledBackends();
  const bool compiled = std::find(names.begin(), names.end(), "cuda") != names.end();
  if (b.ok()) {
    ASSERT_TRUE(compiled);
    EXPECT_EQ((*b)->name(), "cuda");  // a GPU machine
    return;
  }
  EXPECT_EQ(b.status().code(), StatusCode::kUnavailable) << b.status().ToString();
  EXPECT_NE(b.status().message().find(compiled ? "CUDA" : "without CUDA"), std::string::npos)
      << b.status().message();
}

}  // namespace
}  // namespace paratune::backend
