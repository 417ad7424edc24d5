// Every plan the search ranks for a framework, that framework starts.
//
// For a dozen model × cluster × sequence requests and every framework, the
// search's top 10 are put in a plans document and emitted in the framework's
// own format; each emitted file is then read the way the framework reads it
// and checked against the framework's start-up rules as its source states
// them (framework_rules.h, file and lines at each rule). Where the framework
// splits the layers over pipeline stages itself, the split it would build must
// be the split the plan was priced with. Nothing may be refused by the
// emitter, nothing may break a rule.
//
// Setting PARATUNE_EMIT_DUMP to a directory also writes every emitted file
// and its sidecar there (each Megatron-LM plan also as its Megatron-Bridge
// script), for the developer check with the frameworks' own code
// (scripts/fwcheck/run.sh).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/enum_names.h"
#include "common/json.h"
#include "framework_rules.h"
#include "frameworks/emit.h"
#include "param_counts.h"
#include "planner/plans.h"
#include "planner/search.h"
#include "test_world.h"
#include "topology/cluster.h"

namespace paratune::planner {
namespace {

using frameworks_test::Built;
using frameworks_test::World;
using frameworks_test::WorldOf;

struct Request {
  const char* name;
  const char* model;
  const char* cluster;
  int gpus;
  int seq;
  int64_t gbs;
  std::vector<Framework> frameworks;
  Family space;  // the family of those frameworks (the document's space)
  // The Hugging Face model_type of the model's config.json (MoE models: what
  // DeepSpeed's AutoEP presets are keyed by).
  std::string hf_model_type{};
};

constexpr Framework kMg = Framework::kMegatron, kMds = Framework::kMegatronDeepSpeed,
                    kDs = Framework::kDeepSpeed, kFsdp = Framework::kFsdp,
                    kTt = Framework::kTorchtitan, kAx = Framework::kAxonn;

// The dozen requests. Each names the frameworks it is searched for (a
// framework is left out only where the model cannot run under it at all, e.g.
// AxoNN has no sequence parallelism for 128K).
const std::vector<Request>& Requests() {
  static const std::vector<Request> r = {
      // Meta's Llama 3.1 405B run: 16,384 H100, 8K, 2048 sequences (the 405B
      // recipe: 126 layers over pp 8 x vp 8 with embedding and loss as stages).
      {"llama3.1-405b-16k-h100",
       "llama3.1-405b",
       "dgx-h100",
       16384,
       8192,
       2048,
       {kMg},
       Family::kMegatron},
      // The 126-layer torchtitan pipeline (torchtitan splits the stages itself).
      {"llama3.1-405b-tt-512", "llama3.1-405b", "dgx-h100", 512, 8192, 256, {kTt}, Family::kFsdp},
      // Long sequences: Llama-3-70B and Llama-3-8B at 128K.
      {"llama3-70b-128k",
       "llama3-70b",
       "dgx-h100",
       256,
       131072,
       32,
       {kMg, kMds, kTt},
       Family::kAll},
      {"llama3-8b-128k",
       "llama3-8b",
       "dgx-h100",
       64,
       131072,
       32,
       {kMg, kMds, kDs, kTt},
       Family::kAll},
      // A GQA model under Ulysses (DeepSpeed) and context parallelism (Megatron a2a/p2p).
      {"llama3-8b-32k-gqa",
       "llama3-8b",
       "dgx-h100",
       32,
       32768,
       64,
       {kMg, kMds, kDs, kTt},
       Family::kAll},
      // FPDT: a GPT-style model (GeLU MLP with biases, as FPDT runs) at 256K.
      {"gpt3-6.7b-256k-fpdt", "gpt3-6.7b", "dgx-h100", 32, 262144, 16, {kMds}, Family::kDeepSpeed},
      {"gpt3-175b-a100", "gpt3-175b", "dgx-a100-80gb", 1024, 2048, 1536, {kMg, kMds}, Family::kAll},
      {"gpt3-13b-a100",
       "gpt3-13b",
       "dgx-a100-80gb",
       64,
       2048,
       512,
       {kMg, kMds, kDs, kFsdp, kAx},
       Family::kAll},
      {"llama2-70b-h100",
       "llama2-70b",
       "dgx-h100",
       256,
       4096,
       512,
       {kMg, kMds, kFsdp, kTt},
       Family::kAll},
      {"mistral-7b-32k", "mistral-7b", "dgx-h100", 16, 32768, 32, {kMg, kDs, kTt}, Family::kAll},
      {"axonn-20b-perlmutter",
       "axonn-20b",
       "perlmutter",
       256,
       2048,
       1024,
       {kAx, kMg},
       Family::kAll},
      {"llama3.1-70b-h200",
       "llama3.1-70b",
       "dgx-h200",
       1024,
       8192,
       1024,
       {kMg, kTt, kFsdp},
       Family::kAll},
      // Mixture of experts: expert parallelism in torchtitan, Megatron-DeepSpeed
      // and DeepSpeed (through AutoEP's mixtral and qwen3_moe presets);
      // Megatron's MoE arguments are checked in moe_args_test.cc.
      {"mixtral-8x7b-h100",
       "mixtral-8x7b",
       "dgx-h100",
       64,
       4096,
       256,
       {kMds, kDs, kTt},
       Family::kAll,
       "mixtral"},
      {"qwen3-30b-a3b-h100",
       "qwen3-30b-a3b",
       "dgx-h100",
       64,
       4096,
       512,
       {kDs, kTt},
       Family::kAll,
       "qwen3_moe"},
      // gpt-oss: sliding windows Megatron-DeepSpeed cannot express (nothing of
      // its may be ranked), experts AutoEP has no preset for.
      {"gpt-oss-20b-h100",
       "gpt-oss-20b",
       "dgx-h100",
       32,
       8192,
       128,
       {kMds, kDs, kTt},
       Family::kAll,
       "gpt_oss"},
  };
  return r;
}

Job MakeJob(const Request& q, Framework fw) {
  Job j{*ModelPreset(q.model), *topology::ClusterPreset(q.cluster), q.gpus, {}};
  j.training.seq_len = q.seq;
  j.training.global_batch = q.gbs;
  j.training.framework = fw;
  j.training.precision = BestTrainingPrecision(j.cluster.gpu);
  return j;
}

// The rules of the format's framework, as restated from its source.
std::string WouldReject(EmitFormat f, const std::string& text, const World& w, Built* built) {
  switch (f) {
    case EmitFormat::kMegatron:
      return frameworks_test::MegatronWouldReject(text, w, built);
    case EmitFormat::kMegatronDeepSpeed:
      return frameworks_test::MegatronDeepSpeedWouldReject(text, w);
    case EmitFormat::kDeepSpeed:
      return frameworks_test::DeepSpeedWouldReject(text, w);
    case EmitFormat::kTorchtitan:
      return frameworks_test::TorchtitanWouldReject(text, w, built);
    case EmitFormat::kAxonn:
      return frameworks_test::AxonnWouldReject(text, w);
    default:
      return "no framework";
  }
}

// The parameters the format's framework builds from an emitted file, where
// the file states the architecture (param_counts.h); nullopt for the formats
// whose files build the user's own model.
std::optional<int64_t> BuiltParams(EmitFormat f, const std::string& text, int64_t vocab) {
  if (f == EmitFormat::kMegatron) {
    return frameworks_test::MegatronParams(frameworks_test::ParseBash(text), vocab);
  }
  if (f == EmitFormat::kMegatronDeepSpeed) {
    return frameworks_test::MegatronDeepSpeedParams(frameworks_test::ParseBash(text), vocab);
  }
  return std::nullopt;
}

// The dump file's extension by EmitFormat, in its declaration order (emit.h).
constexpr const char* kExtensions[] = {".megatron.sh", ".megatron-deepspeed.sh", ".ds_config.json",
                                       ".axonn.py", ".torchtitan.py"};
const char* Extension(EmitFormat f) { return EnumLookup(f, kExtensions, ".txt"); }

TEST(FrameworksStart, EveryRankedPlanStartsInItsFramework) {
  const char* dump = std::getenv("PARATUNE_EMIT_DUMP");
  if (dump) std::filesystem::create_directories(dump);
  std::map<std::string, int> emitted;  // by format
  int pipelined = 0, uneven = 0, fpdt = 0, ulysses_gqa = 0, cp_gqa = 0, nothing_fits = 0;
  int autoep = 0, moe_ep = 0, offloaded = 0;
  std::map<std::string, int> saves_async, saves_sync;  // by format
  int request_index = 0;
  for (const Request& q : Requests()) {
    // A third of the requests are planned without a token budget, a third
    // with one (asynchronous saves where the framework has them) and a third
    // saving synchronously: the emitted files must save as priced.
    const int budget = request_index++ % 3;
    for (Framework fw : q.frameworks) {
      SCOPED_TRACE(std::string(q.name) + " / " + FrameworkName(fw));
      Job job = MakeJob(q, fw);
      CostModel cm(job.model, job.training, job.cluster, job.gpus);
      SearchOptions opt;
      opt.top_k = 10;
      opt.family = q.space;
      if (budget > 0) {
        opt.goodput.tokens = 1e12;
        opt.goodput.save = budget == 1 ? CheckpointSave::kAuto : CheckpointSave::kSync;
      }
      const SearchResult r = Search(cm, opt).RunAll();
      if (r.top.empty()) {
        // Nothing this framework can run fits (e.g. Megatron-DeepSpeed at 128K
        // for a GQA model: Ulysses refuses GQA, FPDT the SwiGLU MLP).
        ++nothing_fits;
        continue;
      }
      PlanSection section{job, r, 0.0, {}};
      const Json plans = Json::parse(PlansToJson({section}, opt).dump());
      const EmitFormat format = DefaultEmitFormat(plans);
      World w = WorldOf(job);
      w.hf_model_type = q.hf_model_type;
      const int n = static_cast<int>(plans["candidates"].size());
      for (int rank = 1; rank <= n; ++rank) {
        const Json& cand = plans["candidates"][rank - 1];
        w.save_interval = 0;
        w.save_async = false;
        if (cand.contains("goodput")) {
          w.save_interval = static_cast<int64_t>(cand["goodput"]["interval_steps"].get<double>());
          w.save_async = cand["goodput"]["checkpoint"]["async"].get<bool>();
          ++(w.save_async ? saves_async : saves_sync)[EmitFormatName(format)];
        }
        auto text = EmitConfig(plans, rank, format);
        ASSERT_TRUE(text.ok()) << "refused by emit, rank " << rank << ": "
                               << text.status().ToString();
        // A plan Megatron-LM starts is also written as Megatron-Bridge runs it
        // (bridge_test.cc checks that form against Bridge's rules).
        std::optional<std::string> bridge;
        if (format == EmitFormat::kMegatron) {
          auto b = EmitConfig(plans, rank, EmitFormat::kMegatronBridge);
          ASSERT_TRUE(b.ok()) << "refused by emit as Megatron-Bridge, rank " << rank << ": "
                              << b.status().ToString();
          bridge = *b;
          ++emitted["megatron-bridge"];
        }
        auto sidecar = EmitSidecar(plans, rank, format);
        ASSERT_TRUE(sidecar.ok()) << sidecar.status().ToString();
        // The model the framework builds from the file is the one priced (a
        // learned position table extended to the sequence, as emitted).
        if (const auto built_params = BuiltParams(format, *text, job.model.vocab)) {
          EXPECT_EQ(*built_params, cm.model().ParamCount()) << "rank " << rank;
        }
        Built built;
        const std::string why = WouldReject(format, *text, w, &built);
        ASSERT_EQ(why, "") << EmitFormatName(format) << " would reject rank " << rank << ":\n"
                           << *text;
        const ParallelConfig c =
            *ParseConfig(plans["candidates"][rank - 1]["config"], "", job.gpus);
        if (c.pp > 1 && (format == EmitFormat::kMegatron || format == EmitFormat::kTorchtitan)) {
          // The framework builds the split the plan was priced with.
          std::vector<int> priced;
          for (int k = 0; k < c.pp * c.vpp; ++k) {
            priced.push_back(ChunkLayers(job.model.layers, c, cm.framework().support.pp_split, k));
          }
          EXPECT_EQ(built.chunk_layers, priced) << "rank " << rank << ": " << ConfigToString(c);
          EXPECT_EQ(Json::parse((*sidecar)["pipeline"]["chunk_layers"].dump()), Json(priced));
          ++pipelined;
          uneven += !cm.Stages(c).even;
        }
        if (format == EmitFormat::kDeepSpeed && c.ep > 1) {
          // The experts are split over ep ranks as priced, not held whole by every GPU.
          const Json ds = Json::parse(*text);
          EXPECT_EQ(ds.value("expert_parallel", Json::object()).value("autoep_size", 1), c.ep)
              << "rank " << rank << ": " << *text;
          ++autoep;
        }
        moe_ep += c.ep > 1 && format == EmitFormat::kTorchtitan;
        offloaded += c.offload_optimizer;
        fpdt += c.cp > 1 && c.cp_kind == CpKind::kFpdt;
        ulysses_gqa += c.cp > 1 && c.cp_kind == CpKind::kUlysses &&
                       job.model.kv_heads < job.model.heads && fw != Framework::kMegatron;
        cp_gqa += c.cp > 1 && fw == Framework::kMegatron && job.model.kv_heads < job.model.heads;
        ++emitted[EmitFormatName(format)];
        if (dump) {
          const std::string base = std::string(dump) + "/" + q.name + "." + FrameworkName(fw) +
                                   ".rank" + std::to_string(rank);
          ASSERT_TRUE(WriteFileAtomic(base + Extension(format), *text).ok());
          if (bridge) {
            ASSERT_TRUE(WriteFileAtomic(base + ".megatron-bridge.py", *bridge).ok());
          }
          ASSERT_TRUE(WriteFileAtomic(base + ".sidecar.json", sidecar->dump(2) + "\n").ok());
        }
      }
    }
  }
  // Not vacuous: every format emitted plans, and the cases the rules are about occurred.
  for (const char* f :
       {"megatron", "megatron-deepspeed", "deepspeed", "torchtitan", "axonn", "megatron-bridge"}) {
    EXPECT_GT(emitted[f], 5) << f;
  }
  EXPECT_LE(nothing_fits, 3);
  EXPECT_GT(pipelined, 20);
  EXPECT_GT(uneven, 5);
  EXPECT_GT(fpdt, 0);
  EXPECT_GT(ulysses_gqa + cp_gqa, 0);
  EXPECT_GT(autoep, 0);
  EXPECT_GT(moe_ep, 0);
  EXPECT_GT(offloaded, 0);
  // Saves as priced, asynchronous where the framework has it and synchronous
  // where asked or where it has none.
  for (const char* f : {"megatron", "megatron-deepspeed", "torchtitan"}) {
    EXPECT_GT(saves_async[f], 0) << f;
    EXPECT_GT(saves_sync[f], 0) << f;
  }
  EXPECT_GT(saves_sync["axonn"], 0);
  std::cout << "[ start ] emitted:";
  for (const auto& [f, k] : emitted) std::cout << " " << f << " " << k;
  std::cout << "; pipelined " << pipelined << " (uneven " << uneven << "), fpdt " << fpdt
            << ", GQA under sequence/context parallelism " << ulysses_gqa + cp_gqa
            << ", AutoEP " << autoep << ", torchtitan EP " << moe_ep << ", ZeRO-Offload "
            << offloaded << "; saves async/sync: megatron " << saves_async["megatron"] << "/"
            << saves_sync["megatron"] << ", megatron-deepspeed " << saves_async["megatron-deepspeed"]
            << "/" << saves_sync["megatron-deepspeed"] << ", torchtitan " << saves_async["torchtitan"]
            << "/" << saves_sync["torchtitan"] << "; nothing fits " << nothing_fits << "\n";
}

// Llama 3.1 405B on 16,384 H100: Megatron prices the recipe's layout (126
// layers, pp 8 x vp 8, embedding and loss counted as stages), which needs no
// layers % pp·vpp.
TEST(FrameworksStart, Llama405bRecipeLayoutIsPriced) {
  const Request& q = Requests().front();
  Job job = MakeJob(q, Framework::kMegatron);
  CostModel cm(job.model, job.training, job.cluster, job.gpus);
  ParallelConfig c;
  c.gy = 8;
  c.sp = true;
  c.pp = 8;
  c.vpp = 8;
  c.cp = 2;
  c.gdata = 16384 / 128;
  c.pp_embedding_layers = 1;
  c.pp_loss_layers = 1;
  c.distributed_optimizer = true;
  EXPECT_EQ(cm.CheckRules(c), Reason::kOk) << cm.Explain(cm.CheckRules(c), c);
  const StageLayers st = cm.Stages(c);
  // (126 + 2) / 8 = 16 per rank; the embedding and the loss take one slot each.
  EXPECT_EQ(st.first, 15);
  EXPECT_EQ(st.middle, 16);
  EXPECT_EQ(st.last, 15);
  EXPECT_TRUE(cm.Predict(c).iteration_time_s > 0);
}

}  // namespace
}  // namespace paratune::planner
