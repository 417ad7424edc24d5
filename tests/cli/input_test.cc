// Input as people type it (docs/cli.md): a misspelt model, cluster, GPU,
// framework or flag is refused (exit 2) with the closest names, sequence
// lengths and batches take size suffixes on every path, and the V100
// presets plan in fp16.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "cli/commands.h"
#include "common/json.h"
#include "tests/cli/call.h"

namespace paratune::cli {
namespace {

const bool kNoCache = (setenv("PARATUNE_NO_CACHE", "1", 1), true);

// The suggestion part of an error: from "did you mean" to the end of stderr.
std::string Suggestion(const Outcome& r) {
  const size_t at = r.err.find("did you mean");
  return at == std::string::npos ? "" : r.err.substr(at);
}

// A refusal with exit 2 and nothing on stdout, whose suggestions name `meant`.
void ExpectRefusedSuggesting(const Outcome& r, const std::string& meant) {
  EXPECT_EQ(r.code, kExitUsage) << r.err;
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(Suggestion(r).find(meant), std::string::npos) << r.err;
}

TEST(DidYouMean, PresetsFrameworksAndFlagsNameTheClosest) {
  const Args job = {"--gpus", "8", "--global-batch", "64", "--top", "1"};
  auto plan = [&](Args a) {
    a.insert(a.end(), job.begin(), job.end());
    return Call(RunPlan, a);
  };
  ExpectRefusedSuggesting(plan({"--model", "llama3-405b", "--cluster", "dgx-h100"}),
                          "llama3.1-405b");
  ExpectRefusedSuggesting(plan({"--model", "gpt3-1.3b", "--cluster", "dgx-h10"}), "dgx-h100");
  ExpectRefusedSuggesting(plan({"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--framework",
                                "megatorn"}),
                          "megatron");
  ExpectRefusedSuggesting(plan({"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--space",
                                "deepspee"}),
                          "deepspeed");
  ExpectRefusedSuggesting(plan({"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--precision",
                                "bf61"}),
                          "bf16");
  // A GPU named in a cluster object (the GPU-only form).
  ExpectRefusedSuggesting(Call(RunPlan, {"--request", "-", "--top", "1"},
                               R"({"model": "gpt3-1.3b", "cluster": {"gpu": "h10"}, "gpus": 8,
                                   "training": {"global_batch": 64}})"),
                          "h100-sxm");
  // Flags: `--gpu 64` where --gpus exists; underscores for dashes.
  ExpectRefusedSuggesting(Call(RunPlan, {"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpu",
                                         "64"}),
                          "--gpus");
  ExpectRefusedSuggesting(Call(RunPredict, {"--model", "gpt3-1.3b", "--cluster", "dgx-h100",
                                            "--gpus", "8", "--global_batch=64"}),
                          "--global-batch");
  // Nothing close: refused all the same, without a guess.
  Outcome far = plan({"--model", "zzzzzzzz", "--cluster", "dgx-h100"});
  EXPECT_EQ(far.code, kExitUsage);
  EXPECT_EQ(Suggestion(far), "");
}

TEST(DidYouMean, AWrongRequestKeyNamesTheRightOne) {
  Outcome r = Call(RunPredict, {"--request", "-"},
                   R"({"model": "gpt3-1.3b", "cluster": "dgx-h100", "gpus": 8,
                       "training": {"seq": 2048, "global_batch": 64}, "config": {"tp": 1}})");
  EXPECT_EQ(r.code, kExitUsage) << r.err;
  EXPECT_NE(r.err.find("/training/seq: unknown key"), std::string::npos) << r.err;
  EXPECT_NE(Suggestion(r).find("seq_len"), std::string::npos) << r.err;
}

// The same job typed with suffixes, powers or plain integers is one job.
TEST(SizeSuffixes, FlagsAndRequestsReadOneForm) {
  auto predict = [](const std::string& seq, const std::string& batch) {
    Outcome r = Call(RunPredict, {"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "8",
                                  "--seq", seq, "--global-batch", batch, "--config", "tp=1,mbs=1",
                                  "--format", "json"});
    EXPECT_EQ(r.code, kExitOk) << seq << " " << batch << ": " << r.err;
    return r.code == kExitOk ? Json::parse(r.out) : Json();
  };
  const Json plain = predict("2048", "1024");
  ASSERT_TRUE(plain.is_object());
  EXPECT_EQ(plain["training"]["seq_len"], 2048);
  for (const auto& [seq, batch] : std::vector<std::pair<std::string, std::string>>{
           {"2k", "1k"}, {"2K", "1K"}, {"2^11", "2^10"}}) {
    const Json j = predict(seq, batch);
    EXPECT_EQ(j["training"], plain["training"]) << seq << " " << batch;
    EXPECT_EQ(j["iteration_time_s"], plain["iteration_time_s"]) << seq << " " << batch;
  }
  // A request file may write them as strings too.
  Outcome req = Call(RunPredict, {"--request", "-", "--format", "json"},
                     R"({"model": "gpt3-1.3b", "cluster": "dgx-h100", "gpus": 8,
                         "training": {"seq_len": "2k", "global_batch": "2^10"},
                         "config": {"tp": 1, "mbs": 1}})");
  ASSERT_EQ(req.code, kExitOk) << req.err;
  EXPECT_EQ(Json::parse(req.out)["iteration_time_s"], plain["iteration_time_s"]);
}

TEST(SizeSuffixes, GarbageIsRefusedNamingTheFlagAndTheForms) {
  const Args base = {"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "8"};
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--seq", "8q"}, {"--seq", "1.5k"}, {"--global-batch", "lots"}, {"--seq", "2^99"}}) {
    Args a = base;
    a.insert(a.end(), {flag, value});
    Outcome r = Call(RunPredict, a);
    EXPECT_EQ(r.code, kExitUsage) << flag << " " << value;
    EXPECT_NE(r.err.find(flag + ": '" + value + "'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("8k"), std::string::npos) << r.err;
  }
  Outcome req = Call(RunPredict, {"--request", "-"},
                     R"({"model": "gpt3-1.3b", "cluster": "dgx-h100", "gpus": 8,
                         "training": {"seq_len": "8 thousand"}})");
  EXPECT_EQ(req.code, kExitUsage);
  EXPECT_NE(req.err.find("/training/seq_len"), std::string::npos) << req.err;
  // Within range as a number, out of range as a suffix: the same range check.
  Outcome big = Call(RunPredict, {"--request", "-"},
                     R"({"model": "gpt3-1.3b", "cluster": "dgx-h100", "gpus": 8,
                         "training": {"seq_len": "1G"}})");
  EXPECT_EQ(big.code, kExitUsage);
  EXPECT_NE(big.err.find("/training/seq_len: must be in"), std::string::npos) << big.err;
}

TEST(SizeSuffixes, CapacityMaxSeqReadsTheSameForms) {
  auto capacity = [](const std::string& max_seq) {
    return Call(RunCapacity, {"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "8",
                              "--space", "megatron", "--max-seq", max_seq, "--format", "json"});
  };
  const Outcome plain = capacity("16384");
  ASSERT_EQ(plain.code, kExitOk) << plain.err;
  for (const char* form : {"16k", "16K", "2^14"}) {
    const Outcome r = capacity(form);
    ASSERT_EQ(r.code, kExitOk) << form << ": " << r.err;
    EXPECT_EQ(Json::parse(r.out)["families"], Json::parse(plain.out)["families"]) << form;
  }
  const Outcome bad = capacity("16kb");
  EXPECT_EQ(bad.code, kExitUsage);
  EXPECT_NE(bad.err.find("--max-seq: '16kb'"), std::string::npos) << bad.err;
}

// V100 (no bf16, no fp8): a V100 cluster plans in fp16 and says it chose so.
TEST(V100, JeanZayPlansInFp16) {
  Outcome r = Call(RunPlan, {"--model", "gpt3-1.3b", "--cluster", "jean-zay-v100", "--gpus", "16",
                             "--top", "3", "--format", "json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_NE(r.out.find("\"precision\": \"fp16\""), std::string::npos);
  EXPECT_EQ(r.out.find("\"precision\": \"bf16\""), std::string::npos);
  ASSERT_TRUE(j.contains("candidates"));
  ASSERT_FALSE(j["candidates"].empty());
  Outcome t = Call(RunPlan, {"--model", "gpt3-1.3b", "--cluster", "jean-zay-v100", "--gpus", "16",
                             "--top", "1"});
  ASSERT_EQ(t.code, kExitOk) << t.err;
  EXPECT_NE(t.out.find("fp16 (the best v100-32gb supports"), std::string::npos) << t.out;
  // The 16 GB part in the same node, and bf16 refused by name.
  Outcome small = Call(RunPlan, {"--request", "-", "--top", "1"},
                       R"({"model": "gpt3-1.3b", "cluster": {"gpu": "v100-16gb"}, "gpus": 16,
                           "training": {"global_batch": 64}})");
  ASSERT_EQ(small.code, kExitOk) << small.err;
  EXPECT_NE(small.out.find("fp16 (the best v100-16gb supports"), std::string::npos) << small.out;
  Outcome bf16 = Call(RunPlan, {"--model", "gpt3-1.3b", "--cluster", "jean-zay-v100", "--gpus",
                                "16", "--precision", "bf16"});
  EXPECT_EQ(bf16.code, kExitUsage);
  EXPECT_NE(bf16.err.find("/training/precision"), std::string::npos) << bf16.err;
}

}  // namespace
}  // namespace paratune::cli
