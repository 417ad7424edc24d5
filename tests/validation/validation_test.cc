// The model against the public measured runs of Korthikanti et al. 2022
// (../shared/calibration/korthikanti2022.json): one set of A100 preset numbers,
// no per-run knobs. The tolerance is the issue's goal, not a fitted value.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/median.h"
#include "planner/framework.h"
#include "planner/moe.h"
#include "planner/pipeline.h"
#include "validation/fit.h"
#include "validation/picks.h"
#include "validation/validation.h"

namespace paratune::planner {
namespace {

// shared/calibration/<file>, parsed, into `doc`: skips the test where the
// file is absent, fails it where it does not parse. The caller returns when
// IsSkipped() or HasFatalFailure().
void LoadCalibration(const std::string& file, Json* doc) {
  auto text = ReadFileToString(std::string(PARATUNE_SHARED_DIR) + "/calibration/" + file);
  if (!text.ok()) GTEST_SKIP() << "calibration file not found: " << text.status().ToString();
  auto parsed = ParseJson(*text, file);
  ASSERT_TRUE(parsed.ok());
  *doc = std::move(*parsed);
}

// The runs of shared/calibration/public_runs.json, skipping or failing the
// test like LoadCalibration, and failing it where the rows do not map.
void LoadPublicRuns(std::vector<PublishedRun>* runs) {
  Json doc;
  LoadCalibration("public_runs.json", &doc);
  if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;
  auto read = PublishedRunsFromPublicRuns(doc);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  *runs = std::move(*read);
}

// The runs of shared/calibration/moe_runs.json (the raw document in `doc`,
// the rows it could not map in `skipped`), skipping or failing the test like
// LoadCalibration, and failing it where the file does not map.
void LoadMoeRuns(Json* doc, std::vector<PublishedRun>* runs, std::vector<std::string>* skipped) {
  LoadCalibration("moe_runs.json", doc);
  if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;
  auto read = PublishedRunsFromMoeRuns(*doc, skipped);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  *runs = std::move(*read);
}

// The tests on moe_runs.json, the file loaded before each (skipped where it
// is absent, failed where it does not map).
class MoeRuns : public ::testing::Test {
 protected:
  void SetUp() override { LoadMoeRuns(&doc_, &runs_, &skipped_); }
  Json doc_;
  std::vector<PublishedRun> runs_;
  std::vector<std::string> skipped_;
};

// Every row within 7 %, their median within 5 %. The A100 GEMM curve is a fit
// to these rows made before collectives paid NCCL's pipeline fill
// (topology/collective_algorithms.h): the fill prices their TP collectives
// as nccl-tests measure them on an 8-GPU A100 node (within 11 % from 4 MiB up,
// against 24 % fast without it), and the rows moved 1.4 points slower on
// average, the 22B full-recompute row to +6.5 %. Refitting the curve to them
// alone would move the A100 FSDP rows (llm-foundry, the NeMo launcher) the
// other way; the curve's refit belongs to the kernel tables (docs/model.md).
TEST(Validation, KorthikantiRunsWithinSevenPercentCentredWithinFive) {
  Json doc;
  LoadCalibration("korthikanti2022.json", &doc);
  if (IsSkipped() || HasFatalFailure()) return;
  auto runs = PublishedRunsFromCalibration(doc, "dgx-a100-80gb");
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  int checked = 0;
  std::vector<double> errors;
  for (const auto& run : *runs) {
    if (run.measured_iteration_s <= 0) continue;
    const auto& job = run.request.job;
    CostModel cm(job.model, job.training, job.cluster, job.gpus);
    ASSERT_EQ(cm.CheckRules(run.request.config), Reason::kOk) << run.id;
    Prediction p = cm.Predict(run.request.config);
    const double err = (p.iteration_time_s - run.measured_iteration_s) / run.measured_iteration_s;
    errors.push_back(std::fabs(err));
    EXPECT_LT(std::fabs(err), 0.07) << run.id << ": predicted " << p.iteration_time_s
                                    << " s, measured " << run.measured_iteration_s << " s";
    EXPECT_TRUE(p.fits) << run.id << " ran on 80 GB A100s, so it must fit";
    ++checked;
  }
  EXPECT_EQ(checked, 8);  // the eight end-to-end runs with a stated iteration time
  EXPECT_LT(Median(errors), 0.05);
}

// Selective recompute beats full recompute in every published pair, by the
// published margin (Korthikanti Table 5: 29-32 % faster) within a few points.
TEST(Validation, SelectiveVersusFullRecomputeSpeedup) {
  Json doc;
  LoadCalibration("korthikanti2022.json", &doc);
  if (IsSkipped() || HasFatalFailure()) return;
  auto runs = PublishedRunsFromCalibration(doc, "dgx-a100-80gb");
  ASSERT_TRUE(runs.ok());
  for (const auto& sel : *runs) {
    if (sel.id.find("_sp_selective") == std::string::npos || sel.measured_iteration_s <= 0) continue;
    std::string full_id = sel.id.substr(0, sel.id.find("_sp_selective")) + "_full_recompute";
    for (const auto& full : *runs) {
      if (full.id != full_id) continue;
      auto predict = [](const PublishedRun& r) {
        CostModel cm(r.request.job.model, r.request.job.training, r.request.job.cluster, r.request.job.gpus);
        return cm.Predict(r.request.config).iteration_time_s;
      };
      const double measured = full.measured_iteration_s / sel.measured_iteration_s;
      const double predicted = predict(full) / predict(sel);
      EXPECT_NEAR(predicted, measured, 0.05) << sel.id;
    }
  }
}

// The public runs of shared/calibration/public_runs.json (llm-foundry FSDP on
// A100, Megatron-Core/NeMo/MLPerf on H100, NeMo launcher on A100): each
// source's median throughput error stays inside the issue's targets where the
// model meets them today (docs/model.md, Validation), so a change that makes
// a source worse fails here.
TEST(Validation, PublicRunsPerSourceMedians) {
  std::vector<PublishedRun> runs;
  LoadPublicRuns(&runs);
  if (IsSkipped() || HasFatalFailure()) return;
  std::map<std::string, std::vector<double>> errors;
  // |error| of the rows with sharded parameters (ZeRO-3, FSDP's gz) by GPU-count decade.
  std::map<std::string, std::vector<double>> sharded;
  std::vector<std::string> unfit;
  for (const auto& run : runs) {
    const auto& job = run.request.job;
    CostModel cm(job.model, job.training, job.cluster, job.gpus);
    ASSERT_EQ(cm.CheckRules(run.request.config), Reason::kOk) << run.id;
    const Prediction p = cm.Predict(run.request.config);
    errors[run.source_key].push_back(ThroughputError(run, p));
    if (run.request.config.zero >= 3 || run.request.config.gz > 1) {
      sharded[DecadeOf(job.gpus)].push_back(std::fabs(ThroughputError(run, p)));
    }
    if (!p.memory.PeakFits()) unfit.push_back(run.id);
  }
  // Every row ran, so its peak allocation fits the device. FSDP's fp32 shards
  // are the optimizer's master (16 bytes a parameter, not 18), which brings
  // llm-foundry's MPT-30B on 8 A100-80GB inside the capacity; the 2022
  // launcher's GPT-3 5B at tp 1 on 16 and 32 GPUs fits once the allocator's
  // slack is not counted as a limit, on 8 GPUs (the most optimizer state per
  // GPU) it remains above it.
  EXPECT_LE(unfit.size(), 1u);
  for (const std::string& id : unfit) EXPECT_EQ(id, "nemo_launcher_gpt3_5B_8gpu");
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  };
  // Every row of the file with a configuration and a measurement is used.
  EXPECT_EQ(errors["mosaicml/llm-foundry"].size(), 139u);
  EXPECT_EQ(errors["mlcommons/training_results_v3.1"].size(), 7u);
  EXPECT_EQ(errors["NVIDIA/NeMo"].size(), 9u);
  EXPECT_EQ(errors["NVIDIA/Megatron-LM"].size(), 11u);
  // The rows with sharded parameters (llm-foundry's FSDP) hold in every
  // GPU-count decade they reach: 2.7 % at 1-9 GPUs, 2.9 % at 10-99, 4.9 % at
  // 100-999 (the collectives issue asks for 10 %).
  EXPECT_GE(sharded.size(), 3u);
  for (const auto& [decade, abs] : sharded) {
    EXPECT_LE(median(abs), 0.10) << decade << " GPUs, " << abs.size() << " rows";
  }
  for (const char* source : {"mosaicml/llm-foundry", "mlcommons/training_results_v3.1", "NVIDIA/NeMo"}) {
    std::vector<double> abs;
    for (double e : errors[source]) abs.push_back(std::fabs(e));
    EXPECT_LE(median(abs), 0.08) << source;
    // MLPerf v3.1's GPT-3 at 512 to 10,752 H100s reads -5.0 %: its FP8 GEMM
    // ratio is a fit to these rows made before the pipeline fill, which its
    // tensor and data-parallel collectives now pay (as for Korthikanti's).
    const double centred = std::string(source) == "mlcommons/training_results_v3.1" ? 0.055 : 0.05;
    EXPECT_LE(std::fabs(median(errors[source])), centred) << source;
  }
  // Megatron-Core's H100 bf16 table: centred and tight once its stated TP
  // overlap, its unstated knobs at their fastest and Hopper's sustained GEMM
  // fraction are in (12.5 % median |error| before).
  std::vector<double> mcore;
  for (double e : errors["NVIDIA/Megatron-LM"]) mcore.push_back(std::fabs(e));
  EXPECT_LE(median(mcore), 0.06);
  // 4.0 %: the 768-GPU weak-scaling 70B row states no micro-batch, and within
  // the planner's 5 % headroom the fastest that fits is 4 (73 of 79 GiB),
  // which the model prices 8 % faster than the 2 it took at 10 %: the GEMM
  // curve's gain with the micro-batch (docs/model.md, Validation).
  EXPECT_LE(std::fabs(median(errors["NVIDIA/Megatron-LM"])), 0.045);
}

// Megatron-Core's strong scaling of the 177B model at global batch 1152: MFU
// 47 % on 96 GPUs, 42 % on 4608 (the README's figure). The model must fall
// as the measurement does (the same ranking, and the ratio within 5 %).
TEST(Validation, MegatronCoreStrongScalingFalls) {
  std::vector<PublishedRun> runs;
  LoadPublicRuns(&runs);
  if (IsSkipped() || HasFatalFailure()) return;
  double mfu96 = 0, mfu4608 = 0;
  for (const auto& run : runs) {
    if (run.id != "mcore080_strong_177B_96gpu" && run.id != "mcore080_strong_177B_4608gpu")
      continue;
    const auto& job = run.request.job;
    CostModel cm(job.model, job.training, job.cluster, job.gpus);
    const Prediction p = cm.Predict(run.request.config);
    EXPECT_TRUE(p.fits) << run.id;
    (job.gpus == 96 ? mfu96 : mfu4608) = p.mfu;
    // The micro-batch and interleaving are not stated: the fastest that fits.
    bool tuned = false;
    for (const std::string& a : run.assumed)
      tuned |= a.find("the fastest that fits") != std::string::npos;
    EXPECT_TRUE(tuned) << run.id;
  }
  ASSERT_GT(mfu96, 0);
  ASSERT_GT(mfu4608, 0);
  EXPECT_LT(mfu4608, mfu96);
  EXPECT_NEAR(mfu4608 / mfu96, 0.42 / 0.47, 0.05 * 0.42 / 0.47);
}

// Published-run files are user input: rows of the wrong shape or type are
// skipped or refused with a status naming the row, never a JSON exception.
TEST(Validation, MistypedRowsAreBadInputNotExceptions) {
  for (const char* text :
       {R"([7, "row", null])", R"([{"id": 5, "row_type": "throughput"}])",
        R"([{"id": "x", "row_type": 7}])",
        R"([{"id": "x", "row_type": "throughput", "model": [], "parallel": 3, "hardware": {}}])",
        R"([{"id": "x", "row_type": "throughput", "model": {"name": 4, "layers": "two"},
                                "parallel": {"sp_or_cp": 1, "recompute": []}, "hardware": {"gpu": 9}}])"}) {
    const Json doc = Json::parse(text);
    Result<std::vector<PublishedRun>> a = Status::Internal("not run"),
                                      b = Status::Internal("not run");
    EXPECT_NO_THROW(a = PublishedRunsFromPublicRuns(doc)) << text;
    EXPECT_NO_THROW(b = PublishedRunsFromCalibration(doc, "dgx-a100-80gb")) << text;
    for (const auto* r : {&a, &b}) {
      if (r->ok())
        EXPECT_TRUE((*r)->empty()) << text;
      else
        EXPECT_EQ(r->status().code(), StatusCode::kInvalidArgument)
            << text << ": " << r->status().ToString();
    }
  }
}


// The 2026 fleet (shared/calibration/fleet_runs.json: Megatron-Bridge's
// performance tables 25.09-26.06 on H100, B200, GB200, GB300, MLPerf Training
// v5.1 on MI350X/MI355X), with the GPU presets' fitted constants: the rows the
// model expresses are predicted within the issue's targets, with each GPU and
// each release held out of the fit too.
TEST(Validation, FleetRunsInSampleAndHeldOut) {
  Json doc;
  LoadCalibration("fleet_runs.json", &doc);
  if (IsSkipped() || HasFatalFailure()) return;
  auto runs = PublishedRunsFromFleetRuns(doc);
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  EXPECT_EQ(runs->size(), 95u);  // every row of the file maps to a request
  std::vector<PublishedRun> covered;
  std::vector<double> abs;
  std::vector<std::string> unfit;
  for (const auto& run : *runs) {
    const auto& job = run.request.job;
    CostModel cm(job.model, job.training, job.cluster, job.gpus);
    if (cm.CheckRules(run.request.config) != Reason::kOk) {
      // Only Llama 3.1 405B's pipelines that count the embedding and the loss
      // as stages (126 layers over pp·vpp of 32, 64 or 128) are not expressed.
      EXPECT_EQ(job.model.layers, 126) << run.id;
      continue;
    }
    covered.push_back(run);
    const Prediction p = cm.Predict(run.request.config);
    abs.push_back(std::fabs(ThroughputError(run, p)));
    // The run ran: its reserved memory within the whole capacity (the
    // planner's headroom is a margin for plans, not a limit on runs).
    if (p.memory.reserved_GiB > p.memory.capacity_GiB) unfit.push_back(run.id);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  };
  EXPECT_GE(covered.size(), 53u);
  EXPECT_LE(median(abs), 0.10);
  // Every row ran, so every row fits. Llama 3 70B at TP1/PP1 on 64 GB300 with
  // no recipe matched and an FSDP column of 0 cannot hold bf16 weights and
  // gradients replicated: it is read as Megatron-FSDP, as the FP8 recipe of
  // the same layout states.
  EXPECT_TRUE(unfit.empty()) << unfit.front();
  for (const auto& run : covered) {
    if (run.id != "mb-26.02.01-gb300-llama3-70b-nvfp4-64g") continue;
    EXPECT_EQ(run.request.config.zero, 3);
  }
  for (bool by_gpu : {true, false}) {
    std::vector<double> pooled;
    for (const HeldOutGroup& g : LeaveOneOut(covered, by_gpu)) {
      for (double e : g.errors) pooled.push_back(std::fabs(e));
    }
    EXPECT_EQ(pooled.size(), covered.size());
    EXPECT_LE(median(pooled), 0.15) << (by_gpu ? "leave one GPU out" : "leave one release out");
  }
}

// Fleet rows are user input too: a row with an unknown GPU is refused naming it.
TEST(Validation, FleetRowWithUnknownGpuIsRefused) {
  auto doc = ParseJson(
      R"([{"id": "x", "record_type": "run", "row_type": "pretrain", "model": {"layers": 2},
           "parallel": {"tp": 1, "gbs": 8}, "hardware": {"gpu": "TPU9", "num_gpus": 8}}])",
      "t");
  ASSERT_TRUE(doc.ok());
  auto runs = PublishedRunsFromFleetRuns(*doc);
  ASSERT_FALSE(runs.ok());
  EXPECT_NE(runs.status().message().find("TPU9"), std::string::npos);
}

// The MoE runs of shared/calibration/moe_runs.json (Megatron-Bridge's published
// tables): every H100 row maps onto dgx-h100 with the row's EP, dispatcher and
// overlap, satisfies Megatron-Core's rules and is predicted, the Blackwell rows
// on their presets likewise; a row whose stated layout Megatron-Core refuses is
// named as not covered, with the rule. The error bound is the MoE issue's
// goal, a median within 10 % (docs/model.md, Validation, has today's figure).
TEST_F(MoeRuns, MapAndPredict) {
  const std::vector<PublishedRun>& runs = runs_;
  int h100 = 0;
  std::vector<double> abs;
  for (const auto& run : runs) {
    const auto& job = run.request.job;
    if (job.cluster.name == "dgx-h100") ++h100;
    ASSERT_TRUE(job.model.is_moe()) << run.id;
    CostModel cm(job.model, job.training, job.cluster, job.gpus);
    ASSERT_EQ(cm.CheckRules(run.request.config), Reason::kOk)
        << run.id << ": " << cm.Explain(cm.CheckRules(run.request.config), run.request.config);
    const Prediction p = cm.Predict(run.request.config);
    EXPECT_GT(p.iteration_time_s, 0.0) << run.id;
    // Every row ran: each fits its GPU (reserved memory within the whole
    // capacity; the planner's headroom is a margin for plans, not runs).
    EXPECT_LE(p.memory.reserved_GiB, p.memory.capacity_GiB)
        << run.id << ": " << p.memory.reserved_GiB << " GiB reserved of " << p.memory.capacity_GiB;
    abs.push_back(std::fabs(ThroughputError(run, p)));
    // The printed precision names the recipe; Megatron-Bridge's MoE
    // configurations reduce the main gradients in bf16.
    if (run.id == "mb-26.06-gb300-deepseek_v3-mxfp8-256g") {
      EXPECT_EQ(job.training.recipe, topology::Recipe::kMxfp8);
      EXPECT_FALSE(job.training.main_grads_fp32);
    }
    // Qwen3-235B's 94 layers on PP 4 × VP 12: Megatron-Bridge's Qwen3 MoE
    // recipes count the embedding and the loss as layers (qwen3_moe.py:166-167
    // @v0.5.0): (94 + 2) / 4 = 24 per rank, 2 per chunk, so the stated
    // interleaving and the EP all-to-all overlap stay.
    if (run.id == "mb-26.06-gb300-qwen3_235b_a22b-mxfp8-256g") {
      EXPECT_EQ(run.request.config.vpp, 12);
      EXPECT_EQ(run.request.config.pp_embedding_layers, 1);
      EXPECT_EQ(run.request.config.pp_loss_layers, 1);
      EXPECT_TRUE(run.request.config.moe_a2a_overlap);
    }
    // DeepSeek-V3's 61 layers: Megatron-Bridge's layouts give the last rank,
    // which also runs MTP and the loss, the fewest layers
    // (recipes/deepseek/deepseek_v3.py:68-76 @v0.5.0): PP 16 = E+4 | 4 ×14 |
    // 1+MTP+L; PP 4 × VP 4 = 16, 16, 16, 13 per rank, at the stated interleaving.
    const auto stages = [&] {
      return SplitLayers(job.model.layers, run.request.config, PpSplit::kMegatron);
    };
    if (run.id == "mb-26.04-b200-deepseek_v3-mxfp8-256g") {
      EXPECT_EQ(stages().first, 4);
      EXPECT_EQ(stages().last, 1);
    }
    if (run.id == "mb-26.04-gb200-deepseek_v3-mxfp8-256g") {
      EXPECT_EQ(run.request.config.vpp, 4);
      EXPECT_EQ(stages().first, 16);
      EXPECT_EQ(stages().middle, 16);
      EXPECT_EQ(stages().last, 13);
    }
    // Megatron-Bridge 25.09 ran DeepSeek-V3 on H100 with DeepEP, chosen in its
    // run script (run_script.py:56-85 @r0.1.0), which the row does not name.
    if (run.id == "mb-25.09-h100-deepseek_v3-fp8-1024g") {
      EXPECT_EQ(run.request.config.moe_dispatcher, MoeDispatcher::kDeepEp);
    }
  }
  EXPECT_EQ(h100, 15);
  EXPECT_EQ(runs.size() + skipped_.size(), doc_.size());
  for (const std::string& s : skipped_) {
    EXPECT_TRUE(s.find("no cluster preset for GPU") != std::string::npos ||
                s.find("a layout the framework refuses") != std::string::npos)
        << s;
  }
  std::sort(abs.begin(), abs.end());
  ASSERT_FALSE(abs.empty());
  EXPECT_LE(abs[abs.size() / 2], 0.10);  // the goal: in-sample median |error| within 10 %
}

// The kimi-k2 preset is the architecture the Kimi K2 rows describe (their
// source: Megatron-LM's Kimi-K2-Instruct.sh), all but its name, source and
// context length.
TEST_F(MoeRuns, KimiK2PresetIsTheRowsArchitecture) {
  Result<ModelSpec> preset = ModelPreset("kimi-k2");
  ASSERT_TRUE(preset.ok()) << preset.status().ToString();
  int n = 0;
  for (const auto& run : runs_) {
    if (run.id.find("kimi_k2") == std::string::npos) continue;
    ModelSpec a = run.request.job.model, b = *preset;
    a.name = b.name = a.source = b.source = "";
    a.max_seq_len = b.max_seq_len = 0;
    a.norm_eps = b.norm_eps;  // the rows do not state it; the preset has config.json's
    EXPECT_TRUE(a == b) << run.id;
    ++n;
  }
  EXPECT_EQ(n, 4);
}

// Megatron's band for DeepEP/HybridEP dispatch across NVLink domains (framework
// preset `feature_uncertainty`) is the larger of two errors in moe_runs.json:
// the RMS log error of the rows that run it, and the RMS log error of its
// predicted gain where the rows hold an A/B of it (the same question and
// configuration with the all-to-all dispatcher), which is what ranking a
// configuration with it against one without it turns on. The predictions of
// those rows carry it.
TEST_F(MoeRuns, DedupAcrossDomainsBandIsTheLargerOfItsErrors) {
  struct Row {
    const PublishedRun* run;
    Prediction p;
  };
  std::vector<Row> rows;
  for (const auto& run : runs_) {
    const auto& job = run.request.job;
    const CostModel cm(job.model, job.training, job.cluster, job.gpus);
    rows.push_back({&run, cm.Predict(run.request.config)});
  }
  double rows_sq = 0, pairs_sq = 0;
  int n_rows = 0, n_pairs = 0;
  for (const Row& a : rows) {
    if (a.p.feature_band <= 0) continue;
    const ParallelConfig& c = a.run->request.config;
    EXPECT_TRUE(c.moe_dispatcher == MoeDispatcher::kDeepEp ||
                c.moe_dispatcher == MoeDispatcher::kHybridEp)
        << a.run->id;
    const auto& job = a.run->request.job;
    EXPECT_LT(EpRanksPerDomain(c.ep, c.etp, job.cluster.DomainGpus()), c.ep) << a.run->id;
    const double e = std::log1p(ThroughputError(*a.run, a.p));
    rows_sq += e * e;
    ++n_rows;
    for (const Row& b : rows) {
      const auto& jb = b.run->request.job;
      ParallelConfig cb = b.run->request.config;
      if (cb.moe_dispatcher != MoeDispatcher::kAllToAll) continue;
      if (jb.cluster.gpu.name != job.cluster.gpu.name || jb.model.name != job.model.name ||
          jb.gpus != job.gpus || jb.training.global_batch != job.training.global_batch ||
          jb.training.seq_len != job.training.seq_len ||
          jb.training.precision != job.training.precision) {
        continue;
      }
      cb.moe_dispatcher = c.moe_dispatcher;
      if (!(cb == c)) continue;
      // Predicted over measured gain of the dispatcher, as a log.
      const double g = std::log1p(ThroughputError(*a.run, a.p)) -
                       std::log1p(ThroughputError(*b.run, b.p));
      pairs_sq += g * g;
      ++n_pairs;
    }
  }
  ASSERT_GE(n_rows, 5);
  // H100 Qwen3-235B on 4 nodes: 26.02.01 with DeepEP against 26.02, 26.04 and
  // 26.04.01 with the all-to-all, the same layout and overlap.
  ASSERT_GE(n_pairs, 3);
  const double rows_rms = std::sqrt(rows_sq / n_rows);
  const double pairs_rms = std::sqrt(pairs_sq / n_pairs);
  EXPECT_NEAR(FrameworkPreset(Framework::kMegatron).dedup_across_domains_uncertainty,
              std::max(rows_rms, pairs_rms), 0.02);
  // Far above what the rest of the file shows: the reason for the band.
  EXPECT_GT(rows_rms, 0.15);
}

// Megatron-Bridge's B200 tables run Qwen3-30B-A3B on 8 GPUs at EP 8 (16 local
// experts each) at micro-batch 1 in 26.02 (9,691 tokens/s/GPU) and at
// micro-batch 4 in 26.04 (26,859): 2.77x, most of it the host's per-expert
// launches spread over four times the tokens. The model must see most of that
// gain (it saw 1.2x while it issued an MoE layer as fast as a dense one).
TEST_F(MoeRuns, MicroBatchGainOfHostBoundExperts) {
  auto find = [&](const std::string& id) -> const PublishedRun* {
    for (const auto& r : runs_) {
      if (r.id == id) return &r;
    }
    ADD_FAILURE() << id << " not in moe_runs.json";
    return nullptr;
  };
  const PublishedRun* small = find("mb-26.02-b200-qwen3_30b_a3b-mxfp8-8g");
  const PublishedRun* large = find("mb-26.04-b200-qwen3_30b_a3b-mxfp8-8g");
  ASSERT_TRUE(small && large);
  EXPECT_EQ(small->request.config.mbs, 1);
  EXPECT_EQ(large->request.config.mbs, 4);
  auto predicted = [](const PublishedRun& r) {
    const auto& job = r.request.job;
    return CostModel(job.model, job.training, job.cluster, job.gpus)
        .Predict(r.request.config)
        .tokens_per_s;
  };
  const double measured = large->measured_tokens_per_s / small->measured_tokens_per_s;
  EXPECT_NEAR(measured, 26859.0 / 9691.0, 1e-9);
  EXPECT_GT(predicted(*large) / predicted(*small), 0.75 * measured);
}

// The pick check on the Qwen3-30B MoE rows (8 and 16 GPUs: a quick search per
// question): every question gets a pick; each is set beside the fastest per
// GPU any row of the same model, length, GPU and precision measured, which is
// at least the question's own best, so that ratio never exceeds the
// question's; and the row it names is one of those rows.
TEST_F(MoeRuns, PickCheckComparesWithTheFastestOnThePart) {
  std::vector<PublishedRun> runs;
  for (const PublishedRun& r : runs_) {
    if (r.request.job.model.name == "qwen3-30b-a3b") runs.push_back(r);
  }
  ASSERT_GE(runs.size(), 30u);
  auto picks = CheckPicks(runs);
  ASSERT_TRUE(picks.ok()) << picks.status().ToString();
  ASSERT_FALSE(picks->empty());
  std::map<std::string, const PublishedRun*> by_id;
  for (const PublishedRun& r : runs) by_id[r.id] = &r;
  for (const PickCheck& p : *picks) {
    SCOPED_TRACE(p.question);
    ASSERT_FALSE(p.pick_config.empty());
    ASSERT_GT(p.ratio_to_best_same_gpu, 0.0);
    EXPECT_LE(p.ratio_to_best_same_gpu, p.ratio * (1 + 1e-12));
    ASSERT_TRUE(by_id.count(p.best_same_gpu_run)) << p.best_same_gpu_run;
    const PublishedRun& f = *by_id[p.best_same_gpu_run];
    const PublishedRun& q = *by_id[p.run_id];
    EXPECT_EQ(f.request.job.cluster.gpu.name, q.request.job.cluster.gpu.name);
    EXPECT_EQ(f.request.job.training.seq_len, q.request.job.training.seq_len);
    EXPECT_EQ(f.request.job.training.precision, q.request.job.training.precision);
    EXPECT_GE(p.best_same_gpu_per_gpu, p.measured / q.request.job.gpus * (1 - 1e-12));
  }
}

}  // namespace
}  // namespace paratune::planner
