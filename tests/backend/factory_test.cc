// CreateBackend: names, fault wrapping, and backends whose runtime is missing
// failing with kUnavailable and a reason rather than crashing.
#include "backend/factory.h"

#include "backend/bootstrap.h"

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

TEST(Factory, MoreRanksThanGpusIsAUsageErrorNotTryAgainLater) {
  // Two ranks on host n1, one GPU there: the launch cannot work (a usage error, not 75).
  HostLayout layout;
  layout.hosts = {"n1", "n1"};
  layout.local_rank = 1;
  layout.local_size = 2;
  Status s = CheckOneDevicePerRank(layout, 1, /*devices=*/1, /*requested_device=*/-1);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("host n1 runs 2 ranks but has 1 GPUs"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("--ntasks-per-node=1"), std::string::npos);
  EXPECT_TRUE(CheckOneDevicePerRank(layout, 1, 2, -1).ok());
  EXPECT_EQ(CheckOneDevicePerRank(layout, 0, 2, 2).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckOneDevicePerRank(layout, 0, 1, 0).ok());  // an explicit device: the user's call
}

}  // namespace
}  // namespace paratune::backend
