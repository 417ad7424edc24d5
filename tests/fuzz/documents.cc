#include "documents.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "cli/commands.h"
#include "common/json.h"

namespace paratune::fuzz {
namespace {

struct Ran {
  int code = 0;
  std::string out, err;
};

Ran Call(int (*fn)(const cli::Args&, cli::Io), const cli::Args& args,
         const std::string& stdin_text = "") {
  std::istringstream in(stdin_text);
  std::ostringstream out, err;
  Ran r;
  r.code = fn(args, cli::Io{in, out, err, false});
  r.out = out.str();
  r.err = err.str();
  return r;
}

std::string ReadOrDie(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) throw std::runtime_error("fuzz seed: " + text.status().ToString());
  return *text;
}

// Llama 3 8B's config.json as Hugging Face publishes it (meta-llama/Meta-Llama-3-8B).
constexpr const char* kHfLlama3 = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
  "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 8192,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null,
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.40.0.dev0", "use_cache": true, "vocab_size": 128256
})";

const cli::Args kSmallJob = {"--gpus", "8", "--global-batch", "16", "--seq", "2048"};

cli::Args With(cli::Args a, const cli::Args& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

}  // namespace

const char* DocumentName(Document d) {
  switch (d) {
    case Document::kPredictRequest: return "predict_request";
    case Document::kPlanRequest: return "plan_request";
    case Document::kModelFile: return "model_file";
    case Document::kHfConfig: return "hf_config";
    case Document::kClusterFile: return "cluster_file";
    case Document::kProfile: return "profile";
    case Document::kNcclTestsLog: return "nccl_tests_log";
    case Document::kRunReport: return "run_report";
  }
  return "?";
}

Harness::Harness(std::string source_dir, std::string scratch_dir)
    : source_(std::move(source_dir)), scratch_(std::move(scratch_dir)) {
  // A profile imported from a real nccl-tests log, and a run report confirmed
  // on the fake backend from a plan made with it: paratune's own documents.
  profile_path_ = scratch_ + "/seed_profile.json";
  Ran imp = Call(cli::RunProfile, {"import", source_ + "/tests/profiler/data/all_reduce_8xA100.log",
                                   "--cluster", "dgx-a100-80gb", "--out", profile_path_});
  if (imp.code != 0) throw std::runtime_error("fuzz seed: profile import: " + imp.err);
  profile_seed_ = ReadOrDie(profile_path_);
  Ran plan = Call(cli::RunPlan, With({"--model", "gpt3-125m", "--cluster", "dgx-a100-80gb",
                                      "--profile", profile_path_, "--top", "2", "--format", "json"},
                                     kSmallJob));
  if (plan.code != 0) throw std::runtime_error("fuzz seed: plan: " + plan.err);
  const std::string plans = Write("seed_plans.json", plan.out);
  const std::string report = scratch_ + "/seed_report.json";
  Ran confirm = Call(cli::RunConfirm, {"--plans", plans, "--top", "1", "--backend", "fake",
                                       "--samples", "2", "--out", report});
  if (confirm.code != 0) throw std::runtime_error("fuzz seed: confirm: " + confirm.err);
  report_seed_ = ReadOrDie(report);
}

std::string Harness::Write(const std::string& name, const std::string& text) {
  const std::string path = scratch_ + "/" + name;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  return path;
}

std::vector<std::string> Harness::Seeds(Document d) {
  const std::string models = source_ + "/planner/presets/models/";
  const std::string clusters = source_ + "/topology/presets/clusters/";
  const std::string logs = source_ + "/tests/profiler/data/";
  switch (d) {
    case Document::kPredictRequest:
      return {R"({"schema": "paratune.predict_request/v1", "model": "gpt3-1.3b",
                  "cluster": "dgx-a100-80gb", "gpus": 16,
                  "training": {"seq_len": 2048, "global_batch": 64, "precision": "bf16",
                               "attention": "flash", "headroom": 0.1,
                               "framework": "megatron-deepspeed"},
                  "config": {"tp": 2, "pp": 2, "mbs": 1, "recompute": "full", "zero": 1}})",
              R"({"model": {"layers": 4, "hidden": 512, "heads": 8, "vocab": 32000},
                  "cluster": {"gpu": "v100-32gb", "gpus_per_node": 8, "intra_node_GBps": 130,
                              "inter_node_GBps_per_gpu": 12},
                  "gpus": 8, "training": {"global_batch": 32, "precision": "fp16",
                                          "framework": "axonn"},
                  "config": {"gx": 2, "gy": 2, "gdata": 2}})"};
    case Document::kPlanRequest:
      return {R"({"model": "gpt3-125m", "cluster": "dgx-h100", "gpus": 8,
                  "training": {"seq_len": 2048, "global_batch": 16}})",
              R"({"model": {"layers": 4, "hidden": 512, "heads": 8, "vocab": 32000},
                  "cluster": {"gpu": "a100-40gb", "gpus_per_node": 4, "intra_node_GBps": 200,
                              "inter_node_GBps_per_gpu": 25},
                  "gpus": 8, "training": {"global_batch": 16, "seq_len": 1024}})"};
    case Document::kModelFile:
      return {ReadOrDie(models + "gpt3-1.3b.json"), ReadOrDie(models + "llama3-8b.json")};
    case Document::kHfConfig:
      return {kHfLlama3};
    case Document::kClusterFile:
      return {ReadOrDie(clusters + "dgx-h100.json"), ReadOrDie(clusters + "perlmutter.json")};
    case Document::kProfile:
      return {profile_seed_};
    case Document::kNcclTestsLog:
      return {ReadOrDie(logs + "all_reduce_8xA100.log"),
              ReadOrDie(logs + "reduce_scatter_8xA100_old.log"),
              ReadOrDie(logs + "all_gather_2x8xH100.json")};
    case Document::kRunReport:
      return {report_seed_};
  }
  return {};
}

Verdict Harness::Run(Document d, const std::string& input) {
  Ran r;
  bool plan = false;
  switch (d) {
    case Document::kPredictRequest:
      r = Call(cli::RunPredict, {"--request", "-", "--format", "json"}, input);
      break;
    case Document::kPlanRequest:
      plan = true;
      r = Call(cli::RunPlan, {"--request", "-", "--top", "3", "--threads", "1", "--format", "json"},
               input);
      break;
    case Document::kModelFile:
    case Document::kHfConfig:
      r = Call(cli::RunPredict,
               With({"--model", Write("model.json", input), "--cluster", "dgx-h100"}, kSmallJob));
      break;
    case Document::kClusterFile:
      r = Call(cli::RunPredict,
               With({"--model", "gpt3-125m", "--cluster", Write("cluster.json", input)}, kSmallJob));
      break;
    case Document::kProfile:
      r = Call(cli::RunPredict, With({"--model", "gpt3-125m", "--cluster", "dgx-a100-80gb",
                                      "--profile", Write("profile.json", input)},
                                     kSmallJob));
      break;
    case Document::kNcclTestsLog:
      r = Call(cli::RunProfile, {"import", Write("input.log", input), "--out",
                                 scratch_ + "/imported.json"});
      break;
    case Document::kRunReport:
      r = Call(cli::RunCalibrate, {"--reports", Write("report.json", input), "--profile",
                                   profile_path_, "--out", scratch_ + "/calibrated.json"});
      break;
  }
  Verdict v;
  v.code = r.code;
  v.err = r.err;
  const bool allowed = r.code == cli::kExitOk || r.code == cli::kExitUsage ||
                       (plan && r.code == cli::kExitNoFeasible);
  if (!allowed) {
    v.violation = "exit code " + std::to_string(r.code);
  } else if (r.code == cli::kExitUsage && r.err.find(": ") == std::string::npos) {
    v.violation = "exit code 2 without a message";
  }
  return v;
}

}  // namespace paratune::fuzz
