// The `paratune` executable as a user runs it: it loads no CUDA,
// NCCL or MPI library, starts small, and plans without any of them.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace {

struct Exit {
  int code = -1;
  long max_rss_kB = 0;
  std::string out;
};

// Runs PARATUNE_BINARY with `args`, stdout captured, and reads its peak RSS.
Exit RunBinary(const std::vector<std::string>& args) {
  int pipe_fd[2];
  if (::pipe(pipe_fd) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipe_fd[1], STDOUT_FILENO);
    ::close(pipe_fd[0]);
    std::vector<char*> argv;
    std::string bin = PARATUNE_BINARY;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(pipe_fd[1]);
  Exit e;
  std::array<char, 4096> buf;
  for (ssize_t n; (n = ::read(pipe_fd[0], buf.data(), buf.size())) > 0;) e.out.append(buf.data(), n);
  ::close(pipe_fd[0]);
  int status = 0;
  struct rusage ru {};
  ::wait4(pid, &status, 0, &ru);
  e.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  e.max_rss_kB = ru.ru_maxrss;
  return e;
}

// The shared objects a running `paratune` has mapped (the loader's view, as ldd's).
TEST(Binary, VersionLoadsNoGpuOrMpiLibraryAndStaysUnder20MB) {
  Exit v = RunBinary({"version"});
  ASSERT_EQ(v.code, 0);
  EXPECT_EQ(v.out.rfind("paratune ", 0), 0u) << v.out;
#ifndef __SANITIZE_ADDRESS__  // ASan's shadow memory is not paratune's
  EXPECT_LT(v.max_rss_kB, 20 * 1024) << "paratune version peaked at " << v.max_rss_kB << " kB";
#endif
  // What the executable needs: its DT_NEEDED closure, read by the loader in trace mode.
  FILE* p = ::popen(("LD_TRACE_LOADED_OBJECTS=1 " + std::string(PARATUNE_BINARY)).c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string libs;
  std::array<char, 512> line;
  while (std::fgets(line.data(), line.size(), p)) libs += line.data();
  ::pclose(p);
  ASSERT_NE(libs.find("libc.so"), std::string::npos) << libs;  // the trace did run
  for (const char* banned : {"libcuda", "libcudart", "libcublas", "libnccl", "libmpi", "libopen-pal"}) {
    EXPECT_EQ(libs.find(banned), std::string::npos) << banned << " in\n" << libs;
  }
}

TEST(Binary, PlansWithoutAnyBackendModule) {
  // An empty module directory: planning never opens one.
  setenv("PARATUNE_BACKEND_DIR", "/nonexistent-paratune-modules", 1);
  setenv("PARATUNE_NO_CACHE", "1", 1);
  Exit plan = RunBinary({"plan", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "8",
                         "--global-batch", "64", "--top", "1", "--format", "json"});
  EXPECT_EQ(plan.code, 0);
  EXPECT_NE(plan.out.find("\"paratune.plans/v1\""), std::string::npos) << plan.out.substr(0, 500);
}

}  // namespace
