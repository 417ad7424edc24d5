// Input as people type it: counts with size suffixes and "did you mean".
#include "common/user_input.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/strings.h"

namespace paratune {
namespace {

TEST(ParseCount, SuffixesAreBinaryAndCaseDoesNotMatter) {
  EXPECT_EQ(*ParseCount("8192", "n"), 8192);
  const int64_t k = *ParseCount("1k", "n");
  EXPECT_EQ(k, *ParseCount("1K", "n"));
  EXPECT_EQ(*ParseCount("8k", "n"), 8 * k);
  EXPECT_EQ(*ParseCount("8k", "n"), *ParseCount("8192", "n"));  // a sequence of 8k is 8192 tokens
  EXPECT_EQ(*ParseCount("128K", "n"), 128 * k);
  EXPECT_EQ(*ParseCount("1M", "n"), k * k);
  EXPECT_EQ(*ParseCount("1m", "n"), *ParseCount("1M", "n"));
  EXPECT_EQ(*ParseCount("1G", "n"), k * k * k);
  EXPECT_EQ(*ParseCount(" 4M ", "n"), 4 * k * k);
}

TEST(ParseCount, PowersAreThePowerOfTheirSuffixedForm) {
  EXPECT_EQ(*ParseCount("2^20", "n"), *ParseCount("1M", "n"));
  EXPECT_EQ(*ParseCount("2^13", "n"), *ParseCount("8k", "n"));
  EXPECT_EQ(*ParseCount("2^0", "n"), 1);
  EXPECT_EQ(*ParseCount("10^3", "n"), 1000);
  EXPECT_EQ(*ParseCount("1^4000000000000", "n"), 1);  // no loop of 4e12 steps
  EXPECT_EQ(*ParseCount("2^62", "n"), int64_t{1} << 62);
}

TEST(ParseCount, GarbageIsRefusedNamingTheFieldAndTheForms) {
  for (const char* bad : {"", "k", "8x", "8kk", "1.5k", "-8", "-8k", "2^", "^3", "2^-1", "2^64",
                          "3^41", "99999999999G", "9223372036854775808", "0x10", "8 k", "eight"}) {
    Result<int64_t> r = ParseCount(bad, "--seq");
    ASSERT_FALSE(r.ok()) << "'" << bad << "' read as " << *r;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    const std::string& m = r.status().message();
    EXPECT_EQ(m.rfind("--seq: ", 0), 0u) << m;
    EXPECT_NE(m.find("8k"), std::string::npos) << m;
    EXPECT_NE(m.find("2^20"), std::string::npos) << m;
  }
  // A pasted document is quoted by its start only.
  const std::string huge(10000, '7');
  EXPECT_LT(ParseCount(huge + "x", "n").status().message().size(), 400u);
}

TEST(ParseCount, NcclTestsSizesReadTheSameWay) {
  for (const char* s : {"8", "8K", "128M", "8G", "2^20"}) {
    EXPECT_EQ(*ParseSizeBytes(s), *ParseCount(s, "size")) << s;
  }
}

const std::vector<std::string> kModels = {"gpt3-1.3b",  "llama2-70b",    "llama3-70b",
                                          "llama3-8b",  "llama3.1-405b", "llama3.1-70b",
                                          "mixtral-8x7b"};

TEST(ClosestNames, NearMissesFindWhatWasMeant) {
  const std::vector<std::string> m = ClosestNames("llama3-405b", kModels);
  ASSERT_FALSE(m.empty());
  EXPECT_EQ(m.front(), "llama3.1-405b");  // both ends kept: the likeliest
  EXPECT_LE(m.size(), 3u);
  const std::vector<std::string> flags = {"--global-batch", "--gpus", "--model", "--seq"};
  EXPECT_EQ(ClosestNames("--gpu", flags), std::vector<std::string>{"--gpus"});
  EXPECT_EQ(ClosestNames("--global_batch", flags).front(), "--global-batch");
  EXPECT_EQ(ClosestNames("megatorn", {"deepspeed", "megatron", "fsdp"}),
            std::vector<std::string>{"megatron"});  // a swap of neighbours
  EXPECT_EQ(ClosestNames("H100", {"a100-80gb", "h100-sxm", "h200"}).front(), "h100-sxm");
  EXPECT_EQ(ClosestNames("seq", {"seq_len", "global_batch", "precision"}),
            std::vector<std::string>{"seq_len"});
  EXPECT_EQ(ClosestNames("llama3.1-8b-instruct", {"llama3.1-8b", "gpt3-1.3b"}).front(),
            "llama3.1-8b");
}

TEST(ClosestNames, AtMostThreeAndNoneWhenNothingIsClose) {
  const std::vector<std::string> many = {"h100", "h200", "h800", "h20", "h10x", "h10y", "h10z"};
  EXPECT_EQ(ClosestNames("h10", many).size(), 3u);
  EXPECT_TRUE(ClosestNames("zzzzzz", kModels).empty());
  EXPECT_TRUE(ClosestNames("", kModels).empty());
  EXPECT_EQ(DidYouMean("zzzzzz", kModels), "");
  const std::string q = DidYouMean("--gpu", {"--gpus", "--seq"});
  EXPECT_EQ(q, "did you mean --gpus?");
  const std::string three = DidYouMean("h10", many);
  EXPECT_NE(three.find(", "), std::string::npos) << three;
  EXPECT_NE(three.find(" or "), std::string::npos) << three;
}

}  // namespace
}  // namespace paratune
