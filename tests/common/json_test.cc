#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

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

}  // namespace
}  // namespace paratune
