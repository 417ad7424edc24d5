#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/json.h"

namespace paratune {
namespace {

TEST(ObjectReader, ReadsTypedFieldsAndRejectsUnknownKeysWithPointer) {
  Json j = Json::parse(R"({"a": 3, "b": "x", "c": true, "zz": 1})");
  ObjectReader r(j, "/req");
  int64_t a = 0;
  std::string b;
  bool c = false;
  ASSERT_TRUE(r.Integer("a", &a).ok());
  ASSERT_TRUE(r.String("b", &b).ok());
  ASSERT_TRUE(r.OptBool("c", &c).ok());
  EXPECT_EQ(a, 3);
  EXPECT_EQ(b, "x");
  EXPECT_TRUE(c);
  Status s = r.Finish();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("/req/zz"), std::string::npos) << s.message();
}

TEST(ObjectReader, MissingRequiredAndWrongTypeNameTheField) {
  Json j = Json::parse(R"({"n": "seven", "i": 2.5})");
  ObjectReader r(j, "");
  double n = 0;
  int64_t i = 0, missing = 0;
  Status s1 = r.Number("n", &n);
  EXPECT_NE(s1.message().find("/n: must be a number"), std::string::npos) << s1.message();
  Status s2 = r.Integer("i", &i);
  EXPECT_NE(s2.message().find("/i: must be an integer"), std::string::npos) << s2.message();
  Status s3 = r.Integer("m", &missing);
  EXPECT_NE(s3.message().find("/m: is required"), std::string::npos) << s3.message();
}

TEST(ObjectReader, PointerTokensAreEscaped) {
  EXPECT_EQ(JsonPointerToken("a/b~c"), "a~1b~0c");
}

TEST(ParseJson, ReportsByteOffset) {
  auto r = ParseJson("{\"a\": }", "doc");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kParseError);
  EXPECT_NE(r.status().message().find("doc: invalid JSON at byte"), std::string::npos);
}

TEST(WriteFileAtomic, WritesWholeFileAndLeavesNoTemp) {
  std::string path = testing::TempDir() + "/paratune_atomic.json";
  ASSERT_TRUE(WriteFileAtomic(path, "{\"x\": 1}").ok());
  auto text = ReadFileToString(path);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "{\"x\": 1}");
  std::remove(path.c_str());
  EXPECT_FALSE(WriteFileAtomic("/nonexistent-dir/x.json", "1").ok());
}


// Issue 40 (8): `--cluster /dev/zero` ended in std::bad_alloc. What is not a
// regular file, a FIFO or stdin is refused by name before it is opened.
TEST(ReadFileToString, RefusesDevicesDirectoriesAndSocketsByName) {
  for (const auto& [path, kind] : {std::pair<std::string, std::string>{"/dev/zero", "a character device"},
                                   {"/dev/null", "a character device"},
                                   {testing::TempDir(), "a directory"}}) {
    auto r = ReadFileToString(path);
    ASSERT_FALSE(r.ok()) << path;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << path;
    EXPECT_NE(r.status().message().find("'" + path + "' is " + kind), std::string::npos)
        << r.status().message();
  }
  const std::string sock = testing::TempDir() + "/paratune_json_test.sock";
  std::remove(sock.c_str());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(sock.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, sock.c_str(), sock.size() + 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  auto r = ReadFileToString(sock);
  ::close(fd);
  std::remove(sock.c_str());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'" + sock + "' is a socket"), std::string::npos)
      << r.status().message();
  // A missing file stays an I/O error naming it.
  auto missing = ReadFileToString("/nonexistent-dir/x.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kIoError);
  EXPECT_NE(missing.status().message().find("/nonexistent-dir/x.json"), std::string::npos);
}

// A regular file over the limit is refused from its size, before any byte is
// read (a sparse file: no disk or memory is spent).
TEST(ReadFileToString, RefusesARegularFileOverTheLimitBeforeReading) {
  const std::string path = testing::TempDir() + "/paratune_big.json";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(kMaxInputFileBytes) + 1), 0);
  ::close(fd);
  auto r = ReadFileToString(path);
  std::remove(path.c_str());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'" + path + "' is larger than the 256 MiB limit"),
            std::string::npos)
      << r.status().message();
}

// A FIFO (process substitution) is read; one that streams past the limit is
// cut off there with an error naming it.
TEST(ReadFileToString, ReadsAFifoAndStopsOneAtTheLimit) {
  ::signal(SIGPIPE, SIG_IGN);  // the writer below outlives the refused read
  const std::string path = testing::TempDir() + "/paratune_json_test.fifo";
  std::remove(path.c_str());
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  {
    std::thread writer([&] {
      std::ofstream out(path, std::ios::binary);
      out << "{\"x\": 1}";
    });
    auto r = ReadFileToString(path);
    writer.join();
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(*r, "{\"x\": 1}");
  }
  {
    std::thread writer([&] {
      const int fd = ::open(path.c_str(), O_WRONLY);
      if (fd < 0) return;
      std::string chunk(1 << 20, ' ');
      for (size_t sent = 0; sent <= kMaxInputFileBytes; sent += chunk.size()) {
        if (::write(fd, chunk.data(), chunk.size()) < 0) break;  // EPIPE once refused
      }
      ::close(fd);
    });
    auto r = ReadFileToString(path);
    writer.join();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("'" + path + "' is larger than the 256 MiB limit"),
              std::string::npos)
        << r.status().message();
  }
  std::remove(path.c_str());
}

TEST(ReadStreamToString, ReadsAStreamWhole) {
  std::istringstream small("{\"a\": [1, 2]}");
  auto r = ReadStreamToString(small, "<stdin>");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "{\"a\": [1, 2]}");
}

}  // namespace
}  // namespace paratune
