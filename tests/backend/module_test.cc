// The run-time module loader (backend/module.h): modules found in the build
// tree load and carry their table; an absent module, or one whose library is
// missing, is kUnavailable with a message naming what is missing.
#include "backend/module.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "backend/factory.h"

namespace paratune::backend {
namespace {

// Sets an environment variable for the scope of one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(ModuleLoader, NamesTheMissingLibraryFromDlerror) {
  EXPECT_EQ(DescribeLoadFailure("cuda", "/opt/p/lib/paratune/paratune_backend_cuda.so",
                                "libnccl.so.2: cannot open shared object file: No such file or "
                                "directory"),
            "the cuda backend needs libnccl.so.2: not found (libnccl.so.2: cannot open shared "
            "object file: No such file or directory)");
  // glibc names the object that needed it first when the miss is indirect.
  const std::string indirect = DescribeLoadFailure(
      "mpi", "/x/paratune_backend_mpi.so",
      "/usr/lib/libmpi.so.40: libopen-pal.so.40: cannot open shared object file: No such file");
  EXPECT_EQ(indirect.rfind("the mpi-cpu backend needs libopen-pal.so.40: not found (", 0), 0u)
      << indirect;
  const std::string other =
      DescribeLoadFailure("cuda", "/x/paratune_backend_cuda.so", "/x: undefined symbol: ncclFoo");
  EXPECT_EQ(other, "the cuda backend module /x/paratune_backend_cuda.so cannot be loaded: "
                   "/x: undefined symbol: ncclFoo");
}

TEST(ModuleLoader, AbsentModuleNamesTheFileAndWhereItLooked) {
  ScopedEnv env("PARATUNE_BACKEND_DIR", PARATUNE_TEST_EMPTY_DIR);
  auto m = LoadBackendModule("nothing");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(m.status().message().find("paratune_backend_nothing.so was not found (looked in " +
                                      std::string(PARATUNE_TEST_EMPTY_DIR)),
            std::string::npos)
      << m.status().message();
}

TEST(ModuleLoader, ModuleWithAMissingLibraryNamesIt) {
  ScopedEnv env("PARATUNE_BACKEND_DIR", PARATUNE_TEST_BROKEN_MODULE_DIR);
  auto m = LoadBackendModule("broken");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(m.status().message().rfind(
                "the broken backend needs libparatune_test_missing_dep.so: not found (", 0),
            0u)
      << m.status().message();
}

TEST(ModuleLoader, BuiltModulesLoadFromTheBuildTree) {
  const auto names = CompiledBackends();
  int checked = 0;
  for (const auto& [backend, module] : {std::pair{"cuda", "cuda"}, {"mpi-cpu", "mpi"}}) {
    if (std::find(names.begin(), names.end(), backend) == names.end()) continue;
    auto m = LoadBackendModule(module);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_STREQ((*m)->module, module);
    EXPECT_EQ((*m)->abi_version, kModuleAbiVersion);
    if (std::string(module) == "cuda") {
      EXPECT_NE((*m)->create_cuda, nullptr);
      EXPECT_NE((*m)->cuda_device_count, nullptr);
    } else {
      EXPECT_NE((*m)->create_mpi_cpu, nullptr);
      EXPECT_NE((*m)->create_mpi_bootstrap, nullptr);
    }
    // Loaded once: the second call returns the same table.
    auto again = LoadBackendModule(module);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, *m);
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "this build has neither the cuda nor the mpi module";
}

}  // namespace
}  // namespace paratune::backend
