// Training-log readers and the per framework x GPU calibration
// (frameworks/logs.h). The logs under tests/frameworks/data/logs/ are excerpts of
// real published logs; each file's header names the GitHub thread it quotes.
// Expected values are the figures printed in those lines.
#include "frameworks/logs.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "planner/config.h"
#include "planner/cost_model.h"
#include "topology/cluster.h"

namespace paratune::planner {
namespace {

std::string ReadData(const std::string& name) {
  std::ifstream in(std::string(PARATUNE_SOURCE_DIR) + "/tests/frameworks/data/logs/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

LoggedRun Parse(const std::string& name) {
  auto r = ParseTrainingLog(ReadData(name), name);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : LoggedRun{};
}

StepSummary Summarize(const LoggedRun& run) {
  auto s = SummarizeSteps(run, StepSummaryOptions{});
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? *s : StepSummary{};
}

// megatron_no_args.log completed by the flags it lacks (Llama 2 70B on 512
// GPUs of DGX A100 80GB, TP 8, PP 8, sequence parallel): its predict request
// and its measured step time.
void NoArgsRunRequest(PredictRequest* req, double* measured_s) {
  LogFlags flags;
  flags.cluster = Json("dgx-a100-80gb");
  flags.model = Json("llama2-70b");
  flags.gpus = 512;
  flags.seq_len = 4096;
  flags.config = Json{{"tp", 8}, {"pp", 8}, {"mbs", 1}, {"sp", true}};
  auto lr = RequestFromLog(Parse("megatron_no_args.log"), flags, StepSummaryOptions{});
  ASSERT_TRUE(lr.ok()) << lr.status().message();
  auto parsed = ParsePredictRequest(lr->request);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  *req = *parsed;
  *measured_s = lr->measured_iteration_s;
}

bool Mentions(const std::vector<std::string>& lines, const std::string& what) {
  for (const std::string& l : lines) {
    if (l.find(what) != std::string::npos) return true;
  }
  return false;
}

TEST(LogsTest, MegatronArgumentsBlockAndSkippedIterations) {
  const LoggedRun run = Parse("megatron_args_block.log");
  EXPECT_EQ(run.format, LogFormat::kMegatron);
  EXPECT_EQ(run.unit, StepUnit::kSeconds);
  // "using world size: 4, ..., tensor-model-parallel size: 2, pipeline-model-parallel size: 1"
  EXPECT_EQ(run.world_size, 4);
  EXPECT_EQ(run.tp, 2);
  EXPECT_EQ(run.pp, 1);
  // The arguments block.
  EXPECT_EQ(run.layers, 32);
  EXPECT_EQ(run.hidden, 1024);
  EXPECT_EQ(run.seq_len, 1024);
  EXPECT_EQ(run.sp, false);
  EXPECT_EQ(run.recompute, "none");  // recompute_granularity None
  EXPECT_EQ(run.precision, "fp16");
  EXPECT_FALSE(run.heads.has_value());  // not in the quoted lines
  EXPECT_FALSE(run.vpp.has_value());    // num_layers_per_virtual_pipeline_stage None
  // The iteration lines: the measured interval's batch (4) is what ran.
  EXPECT_EQ(run.global_batch, 4);
  ASSERT_EQ(run.steps.size(), 2u);
  EXPECT_EQ(run.steps[0].iteration, 10);
  EXPECT_TRUE(run.steps[0].skipped);  // "number of skipped iterations:  10"
  EXPECT_DOUBLE_EQ(run.steps[0].value, 0.3562);
  EXPECT_FALSE(run.steps[1].skipped);
  EXPECT_DOUBLE_EQ(run.steps[1].value, 0.1406);
  const StepSummary sum = Summarize(run);
  // The skipped interval goes; the one left is not dropped as warm-up.
  EXPECT_EQ(sum.skipped_dropped, 1);
  EXPECT_EQ(sum.warmup_dropped, 0);
  EXPECT_DOUBLE_EQ(sum.median, 0.1406);
}

TEST(LogsTest, MegatronWithoutArgumentsTakesTheConfigurationFromFlags) {
  const LoggedRun run = Parse("megatron_no_args.log");
  EXPECT_EQ(run.format, LogFormat::kMegatron);
  EXPECT_FALSE(run.layers.has_value());
  EXPECT_EQ(run.global_batch, 1024);
  ASSERT_EQ(run.steps.size(), 4u);
  const StepSummary sum = Summarize(run);
  EXPECT_EQ(sum.warmup_dropped, 1);  // iteration 122
  EXPECT_EQ(sum.used, 3);
  EXPECT_DOUBLE_EQ(sum.median, 89.0752);  // median of 87871.6, 89474.8, 89075.2 ms

  LogFlags flags;
  flags.cluster = Json("dgx-a100-80gb");
  auto missing = RequestFromLog(run, flags, StepSummaryOptions{});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--gpus"), std::string::npos);
  flags.gpus = 512;
  missing = RequestFromLog(run, flags, StepSummaryOptions{});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--model"), std::string::npos);

  flags.model = Json("llama2-70b");
  flags.seq_len = 4096;
  flags.config = Json{{"tp", 8}, {"pp", 8}, {"mbs", 1}, {"sp", true}};
  auto lr = RequestFromLog(run, flags, StepSummaryOptions{});
  ASSERT_TRUE(lr.ok()) << lr.status().message();
  EXPECT_DOUBLE_EQ(lr->measured_iteration_s, 89.0752);
  EXPECT_EQ(lr->framework, Framework::kMegatron);
  EXPECT_TRUE(Mentions(lr->read_from_log, "global batch 1024"));
  EXPECT_TRUE(Mentions(lr->assumed, "gpus 512 (--gpus)"));
  EXPECT_TRUE(Mentions(lr->assumed, "model llama2-70b (--model)"));
  EXPECT_TRUE(Mentions(lr->assumed, "tp=8 (--config)"));
  auto req = ParsePredictRequest(lr->request);
  ASSERT_TRUE(req.ok()) << req.status().message();
  EXPECT_EQ(req->job.gpus, 512);
  EXPECT_EQ(req->config.gy, 8);
  EXPECT_EQ(req->config.pp, 8);
  EXPECT_EQ(req->config.gdata, 8);
}

TEST(LogsTest, NemoTwoStepTimingLines) {
  const LoggedRun run = Parse("nemo2_steps.log");
  EXPECT_EQ(run.format, LogFormat::kMegatron);  // NeMo runs Megatron-Core
  EXPECT_EQ(run.unit, StepUnit::kSeconds);
  EXPECT_EQ(run.global_batch, 1);
  ASSERT_EQ(run.steps.size(), 6u);
  EXPECT_EQ(run.steps[0].iteration, 120);
  EXPECT_DOUBLE_EQ(run.steps[0].value, 0.03146);
  const StepSummary sum = Summarize(run);
  EXPECT_EQ(sum.warmup_dropped, 1);
  // 0.03163 0.03215 0.03157 0.0317 0.03147: 0.03215 is 5 scaled MADs out but
  // only 1.6 % above the median: not an outlier.
  EXPECT_EQ(sum.outliers_dropped, 0);
  EXPECT_DOUBLE_EQ(sum.median, 0.03163);
}

TEST(LogsTest, TorchtitanRankPrefixedLines) {
  const LoggedRun run = Parse("torchtitan_rank0.log");
  EXPECT_EQ(run.format, LogFormat::kTorchtitan);
  EXPECT_EQ(run.unit, StepUnit::kTokensPerSecPerGpu);
  EXPECT_EQ(run.ranks_seen, 1);
  ASSERT_EQ(run.steps.size(), 8u);
  EXPECT_EQ(run.steps.front().iteration, 14);
  EXPECT_DOUBLE_EQ(run.steps.front().value, 7282);  // "tps: 7,282"
  const StepSummary sum = Summarize(run);
  EXPECT_EQ(sum.warmup_dropped, 1);
  EXPECT_DOUBLE_EQ(sum.median, 7309);  // steps 15-21
  // tps is per device: iteration = global batch x seq / (tps x gpus).
  LogFlags flags;
  flags.cluster = Json("dgx-h100");
  flags.model = Json("llama3-8b");
  flags.gpus = 8;
  flags.global_batch = 8;
  flags.seq_len = 2048;
  flags.config = Json{{"gz", 8}};
  auto lr = RequestFromLog(run, flags, StepSummaryOptions{});
  ASSERT_TRUE(lr.ok()) << lr.status().message();
  EXPECT_NEAR(lr->measured_iteration_s, 8.0 * 2048 / (7309.0 * 8), 1e-12);
}

TEST(LogsTest, TorchtitanInterleavedRanksCountAStepOnce) {
  const LoggedRun run = Parse("torchtitan_interleaved.log");
  ASSERT_EQ(run.steps.size(), 2u);  // step 4 logged by seven ranks, step 5 once
  EXPECT_EQ(run.steps[0].iteration, 4);
  EXPECT_DOUBLE_EQ(run.steps[0].value, 10050);  // the first rank's line
  EXPECT_EQ(run.steps[1].iteration, 5);
  EXPECT_DOUBLE_EQ(run.steps[1].value, 10007);
  EXPECT_TRUE(Mentions(run.notes, "6 repeated step line(s)"));
}

TEST(LogsTest, DeepSpeedThroughputLines) {
  const LoggedRun run = Parse("deepspeed_steps.log");
  EXPECT_EQ(run.format, LogFormat::kDeepSpeed);
  EXPECT_EQ(run.unit, StepUnit::kSamplesPerSec);
  ASSERT_EQ(run.steps.size(), 2u);
  EXPECT_EQ(run.steps[0].iteration, 40);
  EXPECT_DOUBLE_EQ(run.steps[0].value, 83.48609168106144);
  EXPECT_FALSE(run.steps[1].skipped);  // skipped=2 at both steps: none new
  const StepSummary sum = Summarize(run);
  EXPECT_DOUBLE_EQ(sum.median, 83.73838805358588);
  LogFlags flags;
  flags.cluster = Json("dgx-a100-80gb");
  flags.model = Json("gpt3-1.3b");
  flags.gpus = 8;
  flags.global_batch = 64;
  flags.config = Json{{"zero", 2}};
  auto lr = RequestFromLog(run, flags, StepSummaryOptions{});
  ASSERT_TRUE(lr.ok()) << lr.status().message();
  EXPECT_EQ(lr->framework, Framework::kDeepSpeed);
  EXPECT_DOUBLE_EQ(lr->measured_iteration_s, 64 / 83.73838805358588);
}

TEST(LogsTest, HuggingFaceTrainerWholeRunFigures) {
  const LoggedRun run = Parse("hf_trainer.log");
  EXPECT_EQ(run.format, LogFormat::kHfTrainer);
  EXPECT_TRUE(run.whole_run_average);
  // Trainer 4.4 printed no steps/s; with "Total optimization steps = 203"
  // the step time is train_runtime / 203.
  EXPECT_EQ(run.unit, StepUnit::kSeconds);
  EXPECT_EQ(run.global_batch, 10);
  EXPECT_EQ(run.micro_batch, 10);
  ASSERT_EQ(run.steps.size(), 3u);
  const StepSummary sum = Summarize(run);
  EXPECT_EQ(sum.warmup_dropped, 0);  // warm-up is inside a whole-run figure
  EXPECT_DOUBLE_EQ(sum.median, 21.6148 / 203);

  // Without the steps line only samples/s is left: iteration = batch / rate.
  std::string text = ReadData("hf_trainer.log");
  text.erase(text.find("[INFO|trainer.py:1162]"),
             text.find("{'train_runtime'") - text.find("[INFO|trainer.py:1162]"));
  auto rate = ParseTrainingLog(text, "hf");
  ASSERT_TRUE(rate.ok());
  EXPECT_EQ(rate->unit, StepUnit::kSamplesPerSec);
  EXPECT_DOUBLE_EQ(Summarize(*rate).median, 5.783);
}

// The model of a log with an arguments block: the preset with its
// architecture, else one built from it (what it lacks listed as assumed).
TEST(LogsTest, ModelFromTheArgumentsBlock) {
  LoggedRun run;
  run.steps.push_back({10, 1.0, false});
  run.steps.push_back({20, 1.0, false});
  run.world_size = 8;
  run.global_batch = 64;
  run.seq_len = 4096;
  // Llama 2 7B (Touvron et al. 2023, Table 1 / its config.json): 32 layers,
  // hidden 4096, 32 heads, SwiGLU FFN 11008.
  run.layers = 32;
  run.hidden = 4096;
  run.heads = 32;
  run.ffn_hidden = 11008;
  run.swiglu = true;
  LogFlags flags;
  flags.cluster = Json("dgx-a100-80gb");
  auto lr = RequestFromLog(run, flags, StepSummaryOptions{});
  ASSERT_TRUE(lr.ok()) << lr.status().message();
  EXPECT_EQ(lr->request["model"], "llama2-7b");
  EXPECT_TRUE(Mentions(lr->read_from_log, "model llama2-7b"));
  // An architecture no preset has: built from the log, vocab assumed.
  run.layers = 7;
  lr = RequestFromLog(run, flags, StepSummaryOptions{});
  ASSERT_TRUE(lr.ok()) << lr.status().message();
  ASSERT_TRUE(lr->request["model"].is_object());
  EXPECT_EQ(lr->request["model"]["layers"], 7);
  EXPECT_EQ(lr->request["model"]["ffn_hidden"], 11008);
  EXPECT_EQ(lr->request["model"]["gated_ffn"], true);
  EXPECT_TRUE(Mentions(lr->assumed, "vocab 50257"));
  auto req = ParsePredictRequest(lr->request);
  ASSERT_TRUE(req.ok()) << req.status().message();
  EXPECT_EQ(req->job.model.vocab, 50257);
  // A flag that contradicts the log: a warning, the log wins.
  flags.gpus = 16;
  lr = RequestFromLog(run, flags, StepSummaryOptions{});
  ASSERT_TRUE(lr.ok());
  EXPECT_EQ(lr->request["gpus"], 8);
  EXPECT_TRUE(Mentions(lr->warnings, "--gpus 16 contradicts"));
}

// Megatron-Core's MoE arguments (megatron_moe_args.log, Qwen3-30B-A3B on 16
// GPUs with EP 8): the expert count, top-k and expert width of the published
// config.json pick the qwen3-30b-a3b preset, and the expert-parallel layout
// becomes the config keys ep and etp.
TEST(LogsTest, MegatronMoeArgumentsGiveExpertsAndExpertParallelism) {
  const LoggedRun run = Parse("megatron_moe_args.log");
  EXPECT_EQ(run.format, LogFormat::kMegatron);
  EXPECT_EQ(run.experts, 128);
  EXPECT_EQ(run.top_k, 8);
  EXPECT_EQ(run.moe_ffn_hidden, 768);
  EXPECT_FALSE(run.shared_ffn_hidden.has_value());  // printed as None
  EXPECT_EQ(run.first_dense_layers, 0);             // moe_layer_freq 1: every layer
  EXPECT_EQ(run.moe_layer_step, 1);
  EXPECT_EQ(run.ep, 8);
  EXPECT_EQ(run.etp, 1);
  EXPECT_EQ(run.moe_dispatcher, "alltoall");
  EXPECT_EQ(run.moe_grouped_gemm, true);
  EXPECT_EQ(run.moe_permute_fusion, true);
  EXPECT_EQ(run.moe_a2a_overlap, false);
  EXPECT_FALSE(run.capacity_factor.has_value());  // None: dropless
  EXPECT_EQ(run.head_dim, 128);
  EXPECT_EQ(run.kv_heads, 4);
  ASSERT_EQ(run.steps.size(), 6u);
  EXPECT_DOUBLE_EQ(run.steps[1].value, 2.3114);

  LogFlags flags;
  flags.cluster = Json("dgx-h100");
  auto lr = RequestFromLog(run, flags, StepSummaryOptions{});
  ASSERT_TRUE(lr.ok()) << lr.status().message();
  EXPECT_EQ(lr->request["model"], "qwen3-30b-a3b");
  const Json& moe = lr->moe_config;
  EXPECT_EQ(moe["ep"], 8);
  EXPECT_EQ(moe["etp"], 1);
  EXPECT_EQ(moe["moe_dispatcher"], "alltoall");
  EXPECT_EQ(moe["moe_a2a_overlap"], false);
  // In the request's configuration when the configuration has the expert keys,
  // else named in a warning: never dropped silently.
  const Json& config = lr->request["config"];
  if (config.contains("ep")) {
    EXPECT_EQ(config["ep"], 8);
    EXPECT_TRUE(Mentions(lr->read_from_log, "ep=8 (log)"));
  } else {
    EXPECT_TRUE(Mentions(lr->warnings, "expert layout"));
  }
  // The median after the warm-up interval: 2.3092 s (the middle of 2306.9 ...
  // 2313.0 ms, the 5210.7 ms first interval dropped).
  EXPECT_NEAR(lr->measured_iteration_s, 2.3092, 1e-9);
}

// Megatron's moe_layer_freq as DeepSeek-V3's recipes pass it, ([0]*3+[1]*58):
// printed as the list, it is three dense layers then every layer MoE. An int
// freq of 2 makes layers 0, 2, 4, ... MoE (gpt_layer_specs.py:647-650), which
// the model description's (i + 1) % step form cannot say: a note, no guess.
TEST(LogsTest, MegatronMoeLayerFreqListAndInt) {
  std::string pattern = "[0, 0, 0";
  for (int i = 0; i < 58; ++i) pattern += ", 1";
  pattern += "]";
  auto block = [](const std::string& freq, int layers) {
    auto line = [](const std::string& k, const std::string& v) {
      return "  " + k + " " + std::string(48 - k.size(), '.') + " " + v + "\n";
    };
    return "------------------------ arguments ------------------------\n" +
           line("moe_layer_freq", freq) + line("num_experts", "256") +
           line("num_layers", std::to_string(layers)) +
           "-------------------- end of arguments ---------------------\n"
           " iteration       10/     100 | elapsed time per iteration (ms): 100.0 |\n";
  };
  auto ds = ParseTrainingLog(block(pattern, 61), "ds.log");
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  EXPECT_EQ(ds->first_dense_layers, 3);
  EXPECT_EQ(ds->moe_layer_step, 1);
  auto alt = ParseTrainingLog(block("2", 48), "alt.log");
  ASSERT_TRUE(alt.ok());
  EXPECT_FALSE(alt->moe_layer_step.has_value());
  EXPECT_TRUE(Mentions(alt->notes, "moe_layer_freq 2"));
  // A list of the wrong length is not read.
  auto bad = ParseTrainingLog(block(pattern, 60), "bad.log");
  ASSERT_TRUE(bad.ok());
  EXPECT_FALSE(bad->first_dense_layers.has_value());
}

// torchtitan's expert-parallel mesh line (parallel_dims.py:274-278): EP 4 over
// dp_shard 8, FSDP2 over the shard group, the experts not TP-split; the
// token-based batch line gives sequence and batch.
TEST(LogsTest, TorchtitanExpertParallelMesh) {
  const LoggedRun run = Parse("torchtitan_moe_mesh.log");
  EXPECT_EQ(run.format, LogFormat::kTorchtitan);
  EXPECT_EQ(run.ep, 4);
  EXPECT_EQ(run.etp, 1);
  EXPECT_EQ(run.tp, 1);
  EXPECT_EQ(run.pp, 1);
  EXPECT_EQ(run.zero, 3);
  EXPECT_EQ(run.world_size, 8);
  EXPECT_EQ(run.seq_len, 4096);
  EXPECT_EQ(run.global_batch, 32);  // 131072 tokens / 4096
  EXPECT_EQ(run.micro_batch, 4);    // 16384 tokens per DP rank / 4096
  ASSERT_EQ(run.steps.size(), 6u);
  EXPECT_EQ(run.steps[1].value, 9811);  // tps, thousands separator read
}

// A MoE architecture no preset has: the inline model carries the experts in
// the model description's keys, and the model parser accepts it.
TEST(LogsTest, MoeModelFromTheArgumentsWhenNoPresetMatches) {
  LoggedRun run = Parse("megatron_moe_args.log");
  run.experts = 64;  // not Qwen3-30B-A3B any more
  LogFlags flags;
  flags.cluster = Json("dgx-h100");
  auto lr = RequestFromLog(run, flags, StepSummaryOptions{});
  ASSERT_TRUE(lr.ok()) << lr.status().message();
  const Json& m = lr->request["model"];
  ASSERT_TRUE(m.is_object());
  EXPECT_EQ(m["experts"], 64);
  EXPECT_EQ(m["top_k"], 8);
  EXPECT_EQ(m["moe_ffn_hidden"], 768);
  EXPECT_EQ(m["head_dim"], 128);
  auto spec = ParseModelSpec(m, "/model");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->experts, 64);
  EXPECT_EQ(spec->head_dim(), 128);
}

TEST(LogsTest, UnknownTextIsRefused) {
  auto r = ParseTrainingLog("epoch 1 done\nloss 2.3\n", "x.log");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("x.log"), std::string::npos);
}

TEST(LogsTest, OutliersAreDroppedFromTheMedianAndSkippedSteps) {
  LoggedRun run;
  for (int i = 1; i <= 9; ++i) run.steps.push_back({i, 1.0 + 0.01 * (i % 3), false});
  run.steps.push_back({10, 12.0, false});  // a checkpoint save
  run.steps.push_back({11, 50.0, true});   // an overflow interval
  const StepSummary sum = Summarize(run);
  EXPECT_EQ(sum.outliers_dropped, 1);
  EXPECT_EQ(sum.skipped_dropped, 1);
  EXPECT_LT(sum.median, 1.03);
}

TEST(LogsTest, FrameworkCorrectionsSurviveTheClusterJson) {
  auto c = topology::ClusterPreset("dgx-h100");
  ASSERT_TRUE(c.ok());
  topology::ClusterSpec::FrameworkCorrections e;
  e.framework = "torchtitan";
  e.gpu = c->gpu.name;
  e.corrections.compute = 1.3;
  e.corrections.communication = 1.3;
  e.corrections.memory_bound = 1.3;
  e.corrections.residual = 0.02;
  c->framework_corrections.push_back(e);
  auto back = topology::ParseClusterSpec(topology::ClusterSpecToJson(*c), "");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->framework_corrections.size(), 1u);
  EXPECT_EQ(back->framework_corrections[0], e);
  // Not part of the fingerprint: the cluster is the same hardware.
  auto plain = topology::ClusterPreset("dgx-h100");
  EXPECT_EQ(topology::Fingerprint(*back), topology::Fingerprint(*plain));
}

// Calibrating on one log reproduces it within 5 % and changes nothing for
// another framework or another GPU.
TEST(LogsTest, CalibrationReproducesTheRunAndStaysInItsKey) {
  PredictRequest req;
  double measured = 0;
  ASSERT_NO_FATAL_FAILURE(NoArgsRunRequest(&req, &measured));
  const double before = PredictIterationSeconds(req);
  ASSERT_GT(std::fabs(before - measured) / measured, 0.05) << "the test needs an error to fix";

  auto fit = FitLogCalibration({{"megatron_no_args.log", req, measured}});
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  ASSERT_EQ(fit->entries.size(), 1u);
  const LogCalibrationEntry& e = fit->entries[0];
  EXPECT_EQ(e.framework, "megatron");
  EXPECT_EQ(e.gpu, "a100-80gb");
  EXPECT_FALSE(e.at_bound);
  EXPECT_NEAR(fit->predicted_after_s[0], measured, 0.05 * measured);
  EXPECT_LT(e.error_after, 0.05);
  EXPECT_DOUBLE_EQ(e.error_before, std::fabs(before - measured) / measured);

  // The entry applied the way the planner applies it (a cluster with
  // framework_corrections; the CostModel picks its key).
  topology::ClusterSpec::FrameworkCorrections fc{e.framework, e.gpu, e.factors};
  PredictRequest calibrated = req;
  calibrated.job.cluster.framework_corrections.push_back(fc);
  EXPECT_NEAR(PredictIterationSeconds(calibrated), measured, 0.05 * measured);

  // Another framework on the same cluster: unchanged.
  PredictRequest other_fw = calibrated;
  other_fw.job.training.framework = Framework::kMegatronDeepSpeed;
  other_fw.config.sp = false;
  PredictRequest other_fw_plain = other_fw;
  other_fw_plain.job.cluster.framework_corrections.clear();
  EXPECT_DOUBLE_EQ(PredictIterationSeconds(other_fw), PredictIterationSeconds(other_fw_plain));

  // The same framework on another GPU: unchanged.
  auto h100 = topology::ClusterPreset("dgx-h100");
  ASSERT_TRUE(h100.ok());
  PredictRequest other_gpu = req;
  other_gpu.job.cluster = *h100;
  PredictRequest other_gpu_entry = other_gpu;
  other_gpu_entry.job.cluster.framework_corrections.push_back(fc);
  EXPECT_DOUBLE_EQ(PredictIterationSeconds(other_gpu_entry), PredictIterationSeconds(other_gpu));
}

// Two runs of one key: least squares between them; each key fitted alone.
TEST(LogsTest, SeveralRunsAreFittedInTheLeastSquaresSense) {
  PredictRequest req;
  double m = 0;
  ASSERT_NO_FATAL_FAILURE(NoArgsRunRequest(&req, &m));
  // The same run logged twice, 10 % apart: the fit lands between them.
  auto fit = FitLogCalibration({{"a", req, m}, {"b", req, 1.1 * m}});
  ASSERT_TRUE(fit.ok());
  ASSERT_EQ(fit->entries.size(), 1u);
  EXPECT_EQ(fit->entries[0].runs.size(), 2u);
  EXPECT_GT(fit->predicted_after_s[0], m);
  EXPECT_LT(fit->predicted_after_s[0], 1.1 * m);
}

// torchtitan's start-up line as its releases print it (train.py's
// logger.info: "Training starts at step 1, with local batch size 8, global
// batch size 64, total steps ..." in 2024; "Trainer is initialized with local
// batch size 8, global batch size 64, gradient accumulation steps 1,
// sequence length 2048, ..." later): every field is read wherever it sits.
TEST(LogsTest, TorchtitanStartLineFieldByField) {
  const std::string steps =
      "[titan] 2026-02-24 19:46:17,508 - root - INFO - step:  2  loss:  7.6  memory: "
      "66.91GiB(37.51%)  tps: 10,050\n"
      "[titan] 2026-02-24 19:46:19,145 - root - INFO - step:  3  loss:  7.0  memory: "
      "66.91GiB(37.51%)  tps: 10,007\n";
  auto newer = ParseTrainingLog(
      "[titan] 2025-11-25 19:44:58,838 - root - INFO - Trainer is initialized with local batch "
      "size 8, global "
      "batch size 64, gradient accumulation steps 1, sequence length 2048, total steps 10 (warmup "
      "2)\n" +
          steps,
      "titan");
  ASSERT_TRUE(newer.ok()) << newer.status().message();
  EXPECT_EQ(newer->micro_batch, 8);
  EXPECT_EQ(newer->global_batch, 64);
  EXPECT_EQ(newer->seq_len, 2048);
  auto older = ParseTrainingLog(
      "[titan] 2024-06-01 10:00:00,000 - root - INFO - Training starts at step 1, with local batch "
      "size 4, "
      "global batch size 32, total steps 100\n" +
          steps,
      "titan");
  ASSERT_TRUE(older.ok());
  EXPECT_EQ(older->global_batch, 32);
  EXPECT_EQ(older->micro_batch, 4);
}

// Where the start-up line gives the local batch only, the global batch is
// the local batch on every data-parallel rank of the device mesh: 4 × (2 × 4).
TEST(LogsTest, TorchtitanGlobalBatchFromLocalBatchAndMesh) {
  auto run = ParseTrainingLog(
      "[titan] 2025-01-01 00:00:00,000 - root - INFO - Building 3-D device mesh with "
      "['dp_replicate', "
      "'dp_shard', 'tp'], [2, 4, 2]\n"
      "[titan] 2025-01-01 00:00:01,000 - root - INFO - GPU capacity: NVIDIA H100 80GB HBM3 (0) "
      "with 79.11GiB "
      "memory\n"
      "[titan] 2025-01-01 00:00:02,000 - root - INFO - Training starts at step 1, with local batch "
      "size 4, "
      "sequence length 8192\n"
      "[titan] 2025-01-01 00:00:05,000 - root - INFO - step:  2  loss:  7.6  tps: 3,050\n"
      "[titan] 2025-01-01 00:00:08,000 - root - INFO - step:  3  loss:  7.0  tps: 3,007\n",
      "titan");
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->dp_degree, 8);
  EXPECT_EQ(run->global_batch, 32);
  EXPECT_TRUE(Mentions(run->notes, "local batch 4 x data-parallel degree 8"));
  // The GPU is named, so the cluster need not be: the DGX preset of it.
  LogFlags flags;
  flags.model = Json("llama3-8b");
  auto lr = RequestFromLog(*run, flags, StepSummaryOptions{});
  ASSERT_TRUE(lr.ok()) << lr.status().message();
  EXPECT_EQ(lr->request["cluster"], "dgx-h100");
  EXPECT_EQ(lr->request["training"]["global_batch"], 32);
}

TEST(LogsTest, ClusterForDeviceNames) {
  EXPECT_EQ(ClusterForDevice("NVIDIA H100 80GB HBM3"), "dgx-h100");
  EXPECT_EQ(ClusterForDevice("NVIDIA A100-SXM4-40GB"), "dgx-a100-40gb");
  EXPECT_EQ(ClusterForDevice("NVIDIA A100-SXM4-80GB"), "dgx-a100-80gb");
  EXPECT_EQ(ClusterForDevice("NVIDIA H200"), "dgx-h200");
  EXPECT_FALSE(ClusterForDevice("AMD Instinct MI300X").has_value());
}

// A Megatron-DeepSpeed log whose DeepSpeed engine offloads the optimizer to
// the CPU: DeepSpeed's config print (DeepSpeedConfig.print, "zero_config" with
// its DeepSpeedZeroOffloadOptimizerConfig) makes it a Megatron-DeepSpeed run
// with ZeRO-3 and optimizer offload, not a Megatron one the planner refuses.
TEST(LogsTest, DeepSpeedOffloadAndZeroStage) {
  auto run = ParseTrainingLog(
      "[2024-03-01 10:00:00,000] [INFO] [config.py:988:print]   zero_config .................. "
      "stage=3 "
      "contiguous_gradients=True reduce_scatter=True reduce_bucket_size=500000000 "
      "offload_param=None offload_optimizer=DeepSpeedZeroOffloadOptimizerConfig(device='cpu', "
      "nvme_path=None, buffer_count=4, pin_memory=True, pipeline=False, ratio=1.0) "
      "sub_group_size=1000000000\n"
      " iteration       10/    1000 | consumed samples:          640 | elapsed time per iteration "
      "(ms): "
      "5012.3 | learning rate: 1.0E-04 |\n"
      " iteration       20/    1000 | consumed samples:         1280 | elapsed time per iteration "
      "(ms): "
      "5003.9 | learning rate: 1.0E-04 |\n",
      "mds");
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->format, LogFormat::kMegatronDeepSpeed);
  EXPECT_EQ(run->zero, 3);
  EXPECT_EQ(run->offload_optimizer, true);
  EXPECT_FALSE(run->offload_param.has_value());
}

// Three runs in one torchtitan log (tests/frameworks/data/logs/
// torchtitan_three_runs.log): each run's fields come from its own section.
TEST(LogsTest, SeveralRunsInOneLogAreReadApart) {
  auto runs = ParseTrainingLogRuns(ReadData("torchtitan_three_runs.log"), "three.log");
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  ASSERT_EQ(runs->size(), 3u);
  const LoggedRun& fp8 = (*runs)[0];
  EXPECT_EQ(fp8.precision, "fp8_blockwise");
  EXPECT_EQ(fp8.precision_recipe, "float8 rowwise");
  EXPECT_EQ(fp8.dp_shard, 8);
  EXPECT_EQ(fp8.steps.size(), 6u);
  EXPECT_DOUBLE_EQ(fp8.steps[1].value, 7512);
  const LoggedRun& bf16 = (*runs)[1];
  EXPECT_EQ(bf16.precision, "bf16");  // the args dict's mixed_precision_param
  EXPECT_FALSE(bf16.precision_recipe);
  EXPECT_DOUBLE_EQ(bf16.steps[1].value, 6021);
  EXPECT_EQ(bf16.first_line, 21);
  const LoggedRun& hsdp = (*runs)[2];
  EXPECT_EQ(hsdp.dp_shard, 4);
  EXPECT_EQ(hsdp.dp_replicate, 2);
  EXPECT_EQ(hsdp.world_size, 8);
  EXPECT_NE(DescribeLoggedRun(fp8, 1).find("fp8_blockwise (float8 rowwise)"), std::string::npos)
      << DescribeLoggedRun(fp8, 1);

  // Without a run number the log's runs are listed and --run named.
  auto any = ParseTrainingLog(ReadData("torchtitan_three_runs.log"), "three.log");
  ASSERT_FALSE(any.ok());
  const std::string msg(any.status().message());
  EXPECT_NE(msg.find("holds 3 runs; pass --run N (1-3)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("run 1 (line 1): torchtitan, fp8_blockwise"), std::string::npos) << msg;
  EXPECT_NE(msg.find("run 3 (line 32): torchtitan, bf16"), std::string::npos) << msg;
  auto second = ParseTrainingLog(ReadData("torchtitan_three_runs.log"), "three.log", 2);
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_DOUBLE_EQ(second->steps[1].value, 6021);
  EXPECT_FALSE(ParseTrainingLog(ReadData("torchtitan_three_runs.log"), "three.log", 4).ok());
  // A one-run log is read whatever --run says, as long as it is 1.
  EXPECT_TRUE(ParseTrainingLog(ReadData("torchtitan_rank0.log"), "r0.log", 1).ok());
}

TEST(LogsTest, StepCounterGoingBackStartsANewRun) {
  const std::string one = ReadData("torchtitan_rank0.log");
  auto runs = ParseTrainingLogRuns(one + one, "twice.log");
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  EXPECT_EQ(runs->size(), 2u);
  // Several ranks logging the same step is one run.
  auto inter = ParseTrainingLogRuns(ReadData("torchtitan_interleaved.log"), "i.log");
  ASSERT_TRUE(inter.ok());
  EXPECT_EQ(inter->size(), 1u);
}

// FSDP2's shard group is gz, HSDP's replicas dp.
TEST(LogsTest, TorchtitanShardAndReplicateDegreesMapToGzAndDp) {
  LogFlags flags;
  flags.model = Json("llama3-8b");
  auto runs = ParseTrainingLogRuns(ReadData("torchtitan_three_runs.log"), "three.log");
  ASSERT_TRUE(runs.ok());
  auto full = RequestFromLog((*runs)[0], flags, StepSummaryOptions{});
  ASSERT_TRUE(full.ok()) << full.status().message();
  EXPECT_EQ(full->request["config"]["gz"], 8);
  EXPECT_EQ(full->request["config"]["dp"], 1);
  EXPECT_EQ(full->request["training"]["precision"], "fp8_blockwise");
  EXPECT_TRUE(Mentions(full->read_from_log, "precision fp8_blockwise (float8 rowwise)"));
  auto hsdp = RequestFromLog((*runs)[2], flags, StepSummaryOptions{});
  ASSERT_TRUE(hsdp.ok()) << hsdp.status().message();
  EXPECT_EQ(hsdp->request["config"]["gz"], 4);
  EXPECT_EQ(hsdp->request["config"]["dp"], 2);
  // Releases before the split named FSDP's mesh dimension "dp".
  const LoggedRun old = Parse("torchtitan_dp_mesh.log");
  EXPECT_EQ(old.dp_shard, 8);
  EXPECT_EQ(old.zero, 3);
  auto lr = RequestFromLog(old, flags, StepSummaryOptions{});
  ASSERT_TRUE(lr.ok()) << lr.status().message();
  EXPECT_EQ(lr->request["config"]["gz"], 8);
  EXPECT_EQ(lr->request["config"]["dp"], 1);
}

TEST(LogsTest, InactiveArgumentsAreIgnored) {
  const LoggedRun run = Parse("megatron_deepspeed_no_ds.log");
  EXPECT_EQ(run.format, LogFormat::kMegatron);
  EXPECT_FALSE(run.zero);  // zero_stage 1.0 printed, deepspeed False
  EXPECT_TRUE(Mentions(run.notes, "zero_stage 1 ignored"));
  LogFlags flags;
  flags.cluster = Json("dgx-h100");
  auto lr = RequestFromLog(run, flags, StepSummaryOptions{});
  ASSERT_TRUE(lr.ok()) << lr.status().message();
  EXPECT_FALSE(lr->request["config"].contains("zero") && lr->request["config"]["zero"] != 0)
      << lr->request["config"].dump();
  auto req = ParsePredictRequest(lr->request);
  ASSERT_TRUE(req.ok()) << req.status().message();
  const CostModel cm(req->job.model, req->job.training, req->job.cluster, req->job.gpus);
  EXPECT_TRUE(ValidateConfig(cm, req->config).ok());
}

TEST(LogsTest, MissingFactsAreNamedTogether) {
  auto lr = RequestFromLog(Parse("megatron_no_args.log"), LogFlags{}, StepSummaryOptions{});
  ASSERT_FALSE(lr.ok());
  const std::string msg(lr.status().message());
  for (const char* flag : {"pass --cluster", "pass --gpus", "pass --model"}) {
    EXPECT_NE(msg.find(flag), std::string::npos) << flag << ": " << msg;
  }
  EXPECT_NE(msg.find("3 facts"), std::string::npos) << msg;
}

PredictRequest RangeRequest(const char* cluster, const char* framework, int gpus, int seq,
                            const char* model = "llama3-8b") {
  Json j = {{"model", model},
            {"cluster", cluster},
            {"gpus", gpus},
            {"training", {{"seq_len", seq}, {"global_batch", 64}, {"framework", framework}}},
            {"config", {{"tp", 1}}}};
  auto r = ParsePredictRequest(j);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : PredictRequest{};
}

TEST(LogsTest, RunsOutsideTheCalibratedRangeSayWhichAxis) {
  EXPECT_TRUE(CalibratedRangeWarnings(RangeRequest("dgx-h100", "megatron", 8, 4096)).empty());
  auto w = CalibratedRangeWarnings(RangeRequest("mi300x", "megatron", 8, 4096));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("(GPU generation): no published run on mi300x"), std::string::npos) << w[0];
  w = CalibratedRangeWarnings(RangeRequest("dgx-h100", "torchtitan", 8, 4096));
  EXPECT_TRUE(Mentions(w, "(framework family): no published torchtitan run")) << w.size();
  w = CalibratedRangeWarnings(RangeRequest("dgx-h100", "fsdp", 8, 4096));
  EXPECT_TRUE(Mentions(w, "no published fsdp run on h100 (fsdp runs: a100)"));
  // Megatron on A100 was calibrated at seq 2048 only.
  w = CalibratedRangeWarnings(RangeRequest("dgx-a100-80gb", "megatron", 8, 32768));
  EXPECT_TRUE(Mentions(w, "(sequence-length decade): 32768 tokens")) << (w.empty() ? "" : w[0]);
  w = CalibratedRangeWarnings(RangeRequest("dgx-h100", "megatron", 100000, 4096));
  EXPECT_TRUE(Mentions(w, "(GPU count decade)"));
}

}  // namespace
}  // namespace paratune::planner
