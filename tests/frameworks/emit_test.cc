// Emitters (frameworks/emit.h). Three kinds of test:
//  - golden: whole outputs for several plans, written by hand from each
//    framework's documented format (tests/frameworks/data/emit/*.golden);
//  - rules: the start-up checks of each framework, re-implemented here from
//    the framework's source (file and lines cited at each check), applied to
//    every config the emitters produce over a sweep of several thousand
//    configurations: nothing a framework would reject is ever emitted;
//  - refusals: plans a framework cannot express are refused with the reason.
// The frameworks themselves cannot be installed on the build machines, so the
// mirrors below stand in for them; each cites the snapshot it copies
// (ecosystem.md: Megatron-LM d98e8a6, DeepSpeed edaa722 = 0.19.6, AxoNN
// 660a224, torchtitan 238fa99 = the last TOML-config commit).
#include "frameworks/emit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "common/json.h"
#include "planner/config.h"
#include "planner/plans.h"

namespace paratune::planner {
namespace {

const std::string kData = std::string(PARATUNE_SOURCE_DIR) + "/tests/frameworks/data/emit/";

Json Load(const std::string& name) {
  auto text = ReadFileToString(kData + name);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return Json::parse(*text);
}

std::string Golden(const std::string& name) {
  auto text = ReadFileToString(kData + name);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : std::string();
}

// `plans` with candidate 1's config replaced by `config` (a full config object).
Json WithConfig(Json plans, const Json& config) {
  plans["candidates"][0]["config"] = config;
  return plans;
}

// `plans` with candidate 1's config changed in the keys of `patch` (null erases a key).
Json Patched(Json plans, const Json& patch) {
  for (auto& [k, v] : patch.items()) {
    if (v.is_null()) plans["candidates"][0]["config"].erase(k);
    else plans["candidates"][0]["config"][k] = v;
  }
  return plans;
}

std::string Emit(const Json& plans, EmitFormat f, int rank = 1) {
  auto r = EmitConfig(plans, rank, f);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::string();
}

std::string Refusal(const Json& plans, EmitFormat f) {
  auto r = EmitConfig(plans, 1, f);
  EXPECT_FALSE(r.ok()) << "emitted:\n" << (r.ok() ? *r : "");
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

// ------------------------------------------------------------------ golden

TEST(EmitGolden, MegatronGpt3_175b) {
  const Json plans = Load("gpt3-175b-megatron.plans.json");
  EXPECT_EQ(Emit(plans, EmitFormat::kMegatron), Golden("gpt3-175b-megatron.rank1.megatron.golden"));
  EXPECT_EQ(Emit(plans, EmitFormat::kEnv), Golden("gpt3-175b-megatron.rank1.env.golden"));
}

TEST(EmitGolden, MegatronLlama3_70bSecondRank) {
  const Json plans = Load("llama3-70b-megatron.plans.json");
  EXPECT_EQ(Emit(plans, EmitFormat::kMegatron, 2), Golden("llama3-70b-megatron.rank2.megatron.golden"));
}

TEST(EmitGolden, DeepSpeedLlama3_8b) {
  const Json plans = Load("llama3-8b-deepspeed.plans.json");
  EXPECT_EQ(Emit(plans, EmitFormat::kDeepSpeed), Golden("llama3-8b-deepspeed.rank1.ds_config.golden"));
  EXPECT_EQ(Emit(plans, EmitFormat::kEnv), Golden("llama3-8b-deepspeed.rank1.env.golden"));
}

TEST(EmitGolden, DeepSpeedZeroPlusPlusAndUlysses) {
  // ZeRO-3 with all of ZeRO++ on 64 GPUs of 8-GPU nodes: hpZ inside a node.
  Json zpp = Patched(Load("llama3-8b-deepspeed.plans.json"),
                     {{"tp", 1}, {"pp", 1}, {"cp", 1}, {"dp", 64}, {"zero", 3}, {"qwz", true},
                      {"hpz", true}, {"qgz", true}, {"mbs", 1}, {"recompute", "full"},
                      {"overlap_param_gather", true}, {"overlap_grad_reduce", true}});
  EXPECT_EQ(Emit(zpp, EmitFormat::kDeepSpeed), Golden("llama3-8b.zeropp.ds_config.golden"));
  // Ulysses over 8 ranks, ZeRO-2, no recompute.
  Json uly = Patched(Load("llama3-8b-deepspeed.plans.json"),
                     {{"tp", 1}, {"pp", 1}, {"cp", 8}, {"cp_kind", "ulysses"}, {"dp", 8}, {"zero", 2},
                      {"qwz", false}, {"hpz", false}, {"qgz", false}, {"mbs", 2}, {"recompute", "none"},
                      {"overlap_param_gather", false}, {"overlap_grad_reduce", true}});
  EXPECT_EQ(Emit(uly, EmitFormat::kDeepSpeed), Golden("llama3-8b.ulysses.ds_config.golden"));
}

TEST(EmitGolden, AxonnGpt320bOnAlps) {
  // Rank 3 uses all three tensor axes: gx = 4, gy = 2, gz = 64.
  const Json plans = Load("axonn-320b-axonn.plans.json");
  EXPECT_EQ(Emit(plans, EmitFormat::kAxonn, 3), Golden("axonn-320b-axonn.rank3.axonn.golden"));
  EXPECT_EQ(Emit(plans, EmitFormat::kEnv, 3), Golden("axonn-320b-axonn.rank3.env.golden"));
}

TEST(EmitGolden, TorchtitanLlama3_70b) {
  const Json plans = Load("llama3-70b-fsdp.plans.json");
  EXPECT_EQ(Emit(plans, EmitFormat::kTorchtitan), Golden("llama3-70b-fsdp.rank1.torchtitan.golden"));
  // The same model pipelined and interleaved, with ring CP and HSDP.
  Json pp = Patched(plans, {{"tp", 8}, {"sp", true}, {"pp", 4}, {"vpp", 2}, {"cp", 2},
                            {"cp_kind", "ring"}, {"gz", 2}, {"dp", 1}, {"mbs", 1},
                            {"recompute", "selective"}});
  EXPECT_EQ(Emit(pp, EmitFormat::kTorchtitan), Golden("llama3-70b.pp-cp.torchtitan.golden"));
}

TEST(EmitGolden, JsonIsTheCanonicalConfig) {
  const Json plans = Load("gpt3-175b-megatron.plans.json");
  const Json out = Json::parse(Emit(plans, EmitFormat::kJson));
  auto c = ParseConfig(out, "", plans["gpus"].get<int64_t>());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto want = ParseConfig(plans["candidates"][0]["config"], "", 0);
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(*c, *want);
}

// ------------------------------------------------------------------ mirrors
//
// Each returns "" when the framework would start, else the rule it breaks.

struct World {
  int64_t gpus;
  int64_t layers, hidden, heads, kv_heads, ffn, vocab, seq, gbs;
};

World WorldOf(const Json& plans) {
  auto job = JobFromPlans(plans);
  EXPECT_TRUE(job.ok());
  const ModelSpec& m = job->model;
  return {job->gpus,        m.layers, m.hidden, m.heads, m.kv_heads, m.ffn_hidden, m.vocab,
          job->training.seq_len, job->training.global_batch};
}

// The "--flag value" / "--flag" tokens inside the bash arrays of `text`.
std::map<std::string, std::string> MegatronArgs(const std::string& text) {
  std::map<std::string, std::string> args;
  std::istringstream in(text);
  std::string line;
  bool in_array = false;
  while (std::getline(in, line)) {
    if (line.find("=(") != std::string::npos) {
      in_array = true;
      continue;
    }
    if (line == ")") {
      in_array = false;
      continue;
    }
    if (!in_array) continue;
    std::istringstream words(line);
    std::string flag, value;
    words >> flag;
    if (flag.rfind("--", 0) != 0) continue;
    words >> value;
    EXPECT_EQ(args.count(flag), 0u) << flag << " given twice";
    args[flag] = value;
  }
  return args;
}

int64_t ArgInt(const std::map<std::string, std::string>& a, const std::string& k, int64_t def) {
  auto it = a.find(k);
  return it == a.end() ? def : std::stoll(it->second);
}

std::string MegatronWouldReject(const std::string& text, const World& w) {
  const auto a = MegatronArgs(text);
  const int64_t tp = ArgInt(a, "--tensor-model-parallel-size", 1);
  const int64_t pp = ArgInt(a, "--pipeline-model-parallel-size", 1);
  const int64_t cp = ArgInt(a, "--context-parallel-size", 1);
  const int64_t mbs = ArgInt(a, "--micro-batch-size", -1);
  const int64_t gbs = ArgInt(a, "--global-batch-size", -1);
  const int64_t layers = ArgInt(a, "--num-layers", -1);
  const int64_t heads = ArgInt(a, "--num-attention-heads", -1);
  const int64_t hidden = ArgInt(a, "--hidden-size", -1);
  const int64_t groups = ArgInt(a, "--num-query-groups", heads);
  const int64_t seq = ArgInt(a, "--seq-length", -1);
  if (layers != w.layers || heads != w.heads || hidden != w.hidden || seq != w.seq) return "model shape";
  // megatron/training/arguments.py:424-434 (validate_args): total_model_size = TP·PP·CP.
  if (w.gpus % (tp * pp * cp) != 0) return "world % (TP*PP*CP)";
  const int64_t dp = w.gpus / (tp * pp * cp);  // arguments.py:443-447
  // arguments.py:692-693: micro batch required and > 0.
  if (mbs < 1) return "micro-batch-size";
  // megatron/core/num_microbatches_calculator.py:381-384.
  if (gbs % (mbs * dp) != 0) return "GBS % (MBS*DP)";
  // arguments.py:1330-1332: hidden % heads when kv_channels is not given.
  if (hidden % heads != 0) return "hidden % heads";
  // megatron/core/transformer/transformer_config.py:1446-1450.
  if (heads % tp != 0) return "heads % TP";
  // transformer_config.py:1460-1467: query groups a multiple or a divisor of TP.
  if (groups % tp != 0 && tp % groups != 0) return "query groups vs TP";
  const bool vp_layers = a.count("--num-layers-per-virtual-pipeline-stage") > 0;
  // arguments.py:927-938: at most one of the virtual-pipeline options.
  if (vp_layers && a.count("--num-virtual-stages-per-pipeline-rank")) return "two VP options";
  // arguments.py:986-996 (and 962-970 with VP): layers % PP.
  if (layers % pp != 0) return "layers % PP";
  if (vp_layers) {
    // arguments.py:972-975.
    if ((layers / pp) % ArgInt(a, "--num-layers-per-virtual-pipeline-stage", 1) != 0) return "VP layers";
    const int64_t vp = (layers / pp) / ArgInt(a, "--num-layers-per-virtual-pipeline-stage", 1);
    // arguments.py:978-979: VP 1 is no interleaving; 1000-1010: PP > 1 (> 2 without p2p overlap).
    if (vp > 1) {
      const bool overlap_p2p = a.count("--no-overlap-p2p-communication") == 0;
      if (overlap_p2p ? pp <= 1 : pp <= 2) return "interleaving needs PP";
      // megatron/core/model_parallel_config.py:567-568 (micro-batch groups of PP per virtual
      // stage) and megatron/core/pipeline_parallel/schedules.py:1160-1180.
      const int64_t m = gbs / (mbs * dp);
      if (m < pp || (m % pp > 0 && m % pp < pp)) return "micro-batches vs PP groups";
    }
  }
  // arguments.py:1024-1028.
  if (a.count("--overlap-param-gather") &&
      !(a.count("--use-distributed-optimizer") && a.count("--overlap-grad-reduce"))) {
    return "overlap-param-gather";
  }
  // arguments.py:1335-1338.
  if (cp > 1 && seq % (cp * 2) != 0) return "seq % 2CP";
  // arguments.py:1433-1439 turns SP off at TP 1; 1441-1442: --tp-comm-overlap needs SP.
  const bool sp = a.count("--sequence-parallel") && tp > 1;
  if (a.count("--tp-comm-overlap") && !sp) return "tp-comm-overlap needs SP";
  // transformer_config.py:1908-1925: full recompute needs a method (uniform|block) and a layer count.
  auto g = a.find("--recompute-granularity");
  if (g != a.end()) {
    if (g->second != "full" && g->second != "selective") return "recompute granularity";
    if (g->second == "full") {
      auto m = a.find("--recompute-method");
      if (m == a.end() || (m->second != "uniform" && m->second != "block")) return "recompute method";
      const int64_t n = ArgInt(a, "--recompute-num-layers", 0);
      if (n < 1 || n > layers / pp) return "recompute-num-layers";
    } else {
      // arguments.py:1424-1427 and transformer_config.py:1926-1931.
      if (a.count("--recompute-method") || a.count("--recompute-num-layers")) return "selective + method";
    }
  }
  // megatron/core/transformer/transformer_config.py:1034 (cp_comm_type values).
  if (auto t = a.find("--cp-comm-type"); t != a.end()) {
    if (t->second != "p2p" && t->second != "a2a" && t->second != "allgather" && t->second != "a2a+p2p") {
      return "cp-comm-type";
    }
  }
  // megatron/core/transformer/enums.py:51-58 (AttnBackend).
  if (auto b = a.find("--attention-backend"); b != a.end()) {
    if (b->second != "flash" && b->second != "fused" && b->second != "unfused" && b->second != "local" &&
        b->second != "auto") {
      return "attention-backend";
    }
  }
  return "";
}

std::string DeepSpeedWouldReject(const std::string& text, const World& w, const ParallelConfig& launch) {
  const Json j = Json::parse(text);
  // deepspeed/runtime/config.py:710-724: the DP world size; with Megatron's mpu
  // it is mpu.get_data_parallel_world_size() = world / (TP·PP) (and / SP with
  // Ulysses, lines 721-722 for the mpu-less HF flow).
  const int64_t sp = j.value("sequence_parallel_size", int64_t{1});
  const int64_t dp = w.gpus / (int64_t{launch.gy} * launch.pp * sp);
  if (dp * launch.gy * launch.pp * sp != w.gpus) return "world vs TP*PP*SP";
  if (!j.contains("train_batch_size") || !j.contains("train_micro_batch_size_per_gpu") ||
      !j.contains("gradient_accumulation_steps")) {
    return "batch keys";
  }
  const int64_t train = j["train_batch_size"], micro = j["train_micro_batch_size_per_gpu"],
                gas = j["gradient_accumulation_steps"];
  // runtime/config.py:925-940 (_batch_assertion).
  if (train <= 0 || micro <= 0 || gas <= 0) return "batch > 0";
  if (train != micro * gas * dp) return "train_batch_size == micro * gas * dp";
  const Json& z = j["zero_optimization"];
  // deepspeed/runtime/zero/config.py:90-376 (DeepSpeedZeroConfig fields and their stage3_*
  // aliases) with extra="forbid" (runtime/config_utils.py:110): an unknown key is an error.
  static const std::set<std::string> kZeroKeys = {
      "stage", "contiguous_gradients", "reduce_scatter", "reduce_bucket_size", "allgather_partitions",
      "allgather_bucket_size", "overlap_comm", "offload_param", "offload_optimizer", "sub_group_size",
      "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold", "stage3_max_live_parameters",
      "stage3_max_reuse_distance", "stage3_gather_16bit_weights_on_model_save", "zero_hpz_partition_size",
      "zero_quantized_weights", "zero_quantized_gradients", "mics_shard_size"};
  for (auto& [k, v] : z.items()) {
    if (!kZeroKeys.count(k)) return "unknown zero_optimization key " + k;
  }
  const int stage = z["stage"];
  if (stage < 0 || stage > 3) return "stage";
  // runtime/pipe/engine.py:76-77.
  if (launch.pp > 1 && stage >= 2) return "ZeRO-2/3 with pipeline";
  // runtime/zero/config.py:309 (zero_hpz_partition_size >= 0); utils/groups.py:878-879:
  // min(hpz, world) must divide the world, over consecutive global ranks.
  const int64_t hpz = z.value("zero_hpz_partition_size", int64_t{1});
  if (hpz < 0) return "hpz >= 0";
  if (hpz > 1) {
    if (w.gpus % std::min(hpz, w.gpus) != 0) return "hpz divides world";
    // deepspeed/runtime/zero/stage3.py:703-704: the hpZ group is made of consecutive global
    // ranks, which with Megatron TP inside hold different shards (Ulysses SP ranks share
    // ZeRO's sequence-data-parallel group, so they may).
    if (launch.gy != 1) return "hpz groups would cross tensor ranks";
  }
  // runtime/zero/offload_config.py: offload_param only with stage 3.
  if (z.contains("offload_param") && stage != 3) return "offload_param needs stage 3";
  // deepspeed/sequence/layer.py:40 and :56: heads % sp.
  if (sp > 1 && w.heads % sp != 0) return "heads % SP";
  if (sp > 1 && w.seq % sp != 0) return "seq % SP";
  if (j.contains("bf16") && j.contains("fp16")) return "bf16 and fp16";
  return "";
}

std::map<std::string, int64_t> AxonnInit(const std::string& text) {
  std::map<std::string, int64_t> g;
  const std::regex kv(R"(^\s*(G_\w+)=(\d+),)");
  const std::regex constant(R"(^(\w+) = (\d+))");
  std::istringstream in(text);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, kv) || std::regex_search(line, m, constant)) g[m[1]] = std::stoll(m[2]);
  }
  return g;
}

std::string AxonnWouldReject(const std::string& text, const World& w) {
  auto g = AxonnInit(text);
  const int64_t r = g["G_intra_r"], c = g["G_intra_c"], d = g["G_intra_d"], data = g["G_data"],
                inter = g["G_inter"];
  // axonn/communication.py:58-62.
  if (inter * data * r * c * d != w.gpus) return "product != world";
  // axonn/axonn.py:96-99 (create_dataloader).
  const int64_t gbs = g["GLOBAL_BATCH_SIZE"], mbs = g["MICRO_BATCH_SIZE"];
  if (gbs % (data * mbs) != 0) return "GBS % (G_data*mbs)";
  if (g["GRADIENT_ACCUMULATION_STEPS"] * mbs * data * d != gbs) return "accumulation steps";
  // axonn/intra_layer/automatic_parallelism.py:15-21: every transformer linear
  // must be parallelizable, or auto_parallelize leaves it sequential.
  const int64_t h = w.hidden, f = w.ffn, hd = w.hidden / w.heads;
  const std::pair<int64_t, int64_t> linears[] = {
      {h, h + 2 * w.kv_heads * hd}, {h, h}, {h, w.kv_heads * hd}, {h, f}, {f, h}};
  for (auto [in, out] : linears) {
    if (!(out % r == 0 && in % c == 0 && (out * in / (r * c)) % d == 0)) return "linear not parallelizable";
  }
  if (text.find("model_object_for_overlapping_allgathers=None") != std::string::npos &&
      text.find("overlap_all_gather=True") != std::string::npos) {
    // axonn/intra_layer/overlap_communication.py:125-150: all-gather overlap needs the model.
    return "all-gather overlap without the model";
  }
  return "";
}

std::map<std::string, std::string> Toml(const std::string& text) {
  std::map<std::string, std::string> kv;
  std::string section;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      section = line.substr(1, line.find(']') - 1);
      continue;
    }
    const auto eq = line.find(" = ");
    EXPECT_NE(eq, std::string::npos) << line;
    if (eq == std::string::npos) continue;
    std::string v = line.substr(eq + 3);
    if (v.size() >= 2 && v.front() == '"') v = v.substr(1, v.size() - 2);
    EXPECT_EQ(kv.count(section + "." + line.substr(0, eq)), 0u) << line;
    kv[section + "." + line.substr(0, eq)] = v;
  }
  return kv;
}

std::string TorchtitanWouldReject(const std::string& text, const World& w) {
  auto t = Toml(text);
  auto num = [&](const std::string& k, int64_t def) { return t.count(k) ? std::stoll(t[k]) : def; };
  const int64_t rep = num("parallelism.data_parallel_replicate_degree", 1),
                shard = num("parallelism.data_parallel_shard_degree", -1),
                tp = num("parallelism.tensor_parallel_degree", 1),
                pp = num("parallelism.pipeline_parallel_degree", 1),
                cp = num("parallelism.context_parallel_degree", 1);
  // torchtitan/distributed/parallel_dims.py:45-56 (_validate).
  for (int64_t d : {rep, cp, tp, pp}) {
    if (d < 1) return "degree >= 1";
  }
  const int64_t dp_shard = shard < 0 ? w.gpus / (rep * cp * tp * pp) : shard;
  if (dp_shard < 1 || rep * dp_shard * cp * tp * pp != w.gpus) return "product != world";
  // torchtitan/config/job_config.py:282: mixed_precision_param values.
  const std::string mp = t.count("training.mixed_precision_param") ? t["training.mixed_precision_param"] : "bfloat16";
  if (mp != "bfloat16" && mp != "float32") return "mixed_precision_param";
  // torchtitan/train.py:196-213: global batch vs local batch × batch degree (dp_replicate·dp_shard).
  const int64_t local = num("training.local_batch_size", 8);
  const int64_t gbs = num("training.global_batch_size", local * rep * dp_shard);
  if (gbs <= 0 || gbs % (local * rep * dp_shard) != 0) return "GBS % (local*dp)";
  if (num("training.seq_len", 2048) != w.seq) return "seq_len";
  if (pp > 1) {
    // distributed/pipeline_parallel.py:184-193.
    const int64_t micro = num("parallelism.pipeline_parallel_microbatch_size", 1);
    if (local % micro != 0) return "local % microbatch";
    const std::string schedule = t.count("parallelism.pipeline_parallel_schedule")
                                     ? t["parallelism.pipeline_parallel_schedule"] : "1F1B";
    const bool single = schedule == "1F1B" || schedule == "GPipe";
    const int64_t lps = num("parallelism.pipeline_parallel_layers_per_stage", -1);
    if (lps > 0) {
      // distributed/pipeline_parallel.py:66-110.
      const int64_t in_w = num("parallelism.pipeline_parallel_first_stage_less_layers", 1);
      const int64_t out_w = num("parallelism.pipeline_parallel_last_stage_less_layers", 1);
      const int64_t stages = (w.layers + in_w + out_w + lps - 1) / lps;
      if (stages % pp != 0) return "stages % PP";
      if (single && stages / pp != 1) return "single-stage schedule";
      if (!single && stages / pp < 2) return "looped schedule needs 2 stages";
    }
  }
  // torchtitan/config/job_config.py @ 238fa99: the fields of Training (243-300), Parallelism
  // (312-470), ActivationCheckpoint (651-660) and Compile (721-725); the config manager
  // refuses keys a dataclass does not have.
  static const std::set<std::string> kKeys = {
      "training.local_batch_size", "training.global_batch_size", "training.seq_len",
      "training.mixed_precision_param", "parallelism.data_parallel_replicate_degree",
      "parallelism.data_parallel_shard_degree", "parallelism.tensor_parallel_degree",
      "parallelism.pipeline_parallel_degree", "parallelism.context_parallel_degree",
      "parallelism.pipeline_parallel_schedule", "parallelism.pipeline_parallel_microbatch_size",
      "parallelism.pipeline_parallel_layers_per_stage", "parallelism.pipeline_parallel_first_stage_less_layers",
      "parallelism.pipeline_parallel_last_stage_less_layers", "parallelism.enable_async_tensor_parallel",
      "activation_checkpoint.mode", "activation_checkpoint.selective_ac_option", "compile.enable"};
  for (auto& [k, v] : t) {
    if (!kKeys.count(k)) return "unknown key " + k;
  }
  // torchtitan/config/job_config.py:651-655 (activation_checkpoint.mode).
  const std::string ac = t.count("activation_checkpoint.mode") ? t["activation_checkpoint.mode"] : "selective";
  if (ac != "none" && ac != "selective" && ac != "full" && ac != "memory_budget") return "ac mode";
  return "";
}

// ------------------------------------------------------------------ rules

// Every configuration of a broad sweep is emitted in every framework format;
// whatever is emitted must pass that framework's mirrored start-up checks.
void SweepAndCheck(const std::string& fixture, int* emitted_total, int* refused_total) {
  const Json base = Load(fixture);
  const World w = WorldOf(base);
  std::map<EmitFormat, int> emitted, refused;
  int configs = 0;
  for (int gx : {1, 2})
    for (int gy : {1, 2, 4, 8})
      for (int gz : {1, 2, 4})
        for (int pp : {1, 2, 4})
          for (int vpp : {1, 2})
            for (int cp : {1, 2})
              for (const char* kind : {"ring", "ulysses"})
                for (int zero : {0, 1, 3})
                  for (bool sp : {false, true})
                    for (int mbs : {1, 2})
                      for (const char* rc : {"none", "selective", "full"}) {
                        if (cp == 1 && std::string(kind) == "ulysses") continue;
                        const int64_t other = int64_t{gx} * gy * gz * pp * cp;
                        if (w.gpus % other != 0) continue;
                        // The planner's own batch rule (a plan never breaks it).
                        if (w.gbs % (int64_t{mbs} * gz * (w.gpus / other)) != 0) continue;
                        Json c = {{"gx", gx},   {"gy", gy},     {"gz", gz},   {"pp", pp},
                                  {"vpp", vpp}, {"cp", cp},     {"cp_kind", kind},
                                  {"sp", sp},   {"zero", zero}, {"mbs", mbs}, {"recompute", rc},
                                  {"dp", w.gpus / other},
                                  {"hpz", zero == 3}, {"qwz", zero == 3},
                                  {"overlap_grad_reduce", true},
                                  {"overlap_param_gather", zero == 1},
                                  {"distributed_optimizer", false},
                                  {"tp_comm_overlap", sp && gy > 1},
                                  {"overlap_p2p", vpp > 1},
                                  {"oar", true}, {"ors", gz > 1}, {"oag", gz > 1}};
                        const Json plans = WithConfig(base, c);
                        auto parsed = ParseConfig(c, "", 0);
                        ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
                        ++configs;
                        for (EmitFormat f : {EmitFormat::kMegatron, EmitFormat::kDeepSpeed,
                                             EmitFormat::kAxonn, EmitFormat::kTorchtitan}) {
                          auto r = EmitConfig(plans, 1, f);
                          if (!r.ok()) {
                            ++refused[f];
                            EXPECT_NE(r.status().message().find("cannot express"), std::string::npos)
                                << r.status().message();
                            continue;
                          }
                          ++emitted[f];
                          std::string why;
                          switch (f) {
                            case EmitFormat::kMegatron: why = MegatronWouldReject(*r, w); break;
                            case EmitFormat::kDeepSpeed: why = DeepSpeedWouldReject(*r, w, *parsed); break;
                            case EmitFormat::kAxonn: why = AxonnWouldReject(*r, w); break;
                            case EmitFormat::kTorchtitan: why = TorchtitanWouldReject(*r, w); break;
                            default: break;
                          }
                          ASSERT_EQ(why, "") << EmitFormatName(f) << " would reject "
                                             << ConfigToString(*parsed) << ":\n" << *r;
                        }
                      }
  EXPECT_GT(configs, 1000) << fixture;
  for (EmitFormat f : {EmitFormat::kMegatron, EmitFormat::kDeepSpeed, EmitFormat::kAxonn,
                       EmitFormat::kTorchtitan}) {
    // Not vacuous: each format both emits and refuses parts of the sweep.
    EXPECT_GT(emitted[f], 20) << EmitFormatName(f) << " on " << fixture;
    EXPECT_GT(refused[f], 20) << EmitFormatName(f) << " on " << fixture;
    *emitted_total += emitted[f];
    *refused_total += refused[f];
  }
}

TEST(EmitRules, NothingAFrameworkRejectsIsEmitted) {
  int emitted = 0, refused = 0;
  // GPT-3 175B: 96 heads, 96 layers, learned positions, biases.
  SweepAndCheck("gpt3-175b-megatron.plans.json", &emitted, &refused);
  // Llama 3 8B: GQA (8 KV heads), 32 layers, SwiGLU, seq 8192, 64 GPUs.
  SweepAndCheck("llama3-8b-deepspeed.plans.json", &emitted, &refused);
  // GPT-3 13B: 40 heads and 40 layers, which TP 8 and PP 8 do not divide.
  SweepAndCheck("gpt3-13b-megatron.plans.json", &emitted, &refused);
  std::cout << "[ emit sweep ] " << emitted << " configs emitted, " << refused << " refused\n";
}

// Plans the mirrors would reject are refused, each with its rule.
TEST(EmitRules, MegatronRefusals) {
  const Json p = Load("gpt3-175b-megatron.plans.json");
  // GPT-3 175B has 96 heads: TP 64 does not divide them (transformer_config.py:1446).
  EXPECT_NE(Refusal(Patched(p, {{"tp", 64}, {"pp", 1}, {"cp", 1}, {"dp", 16}, {"vpp", 1}}), EmitFormat::kMegatron)
                .find("not divisible by TP 64"),
            std::string::npos);
  // 96 layers over PP 64 (arguments.py:990-996).
  EXPECT_NE(Refusal(Patched(p, {{"tp", 1}, {"pp", 64}, {"cp", 1}, {"dp", 16}, {"vpp", 1}}), EmitFormat::kMegatron)
                .find("layers 96 are not divisible by PP 64"),
            std::string::npos);
  // Interleaving with PP 2 and no p2p overlap (arguments.py:1000-1010).
  EXPECT_NE(Refusal(Patched(p, {{"tp", 8}, {"pp", 2}, {"vpp", 2}, {"cp", 1}, {"dp", 64}, {"overlap_p2p", false}}),
                    EmitFormat::kMegatron)
                .find("PP > 2 without p2p overlap"),
            std::string::npos);
  // GBS 1536 with MBS 8 and DP 16 is 12 micro-batches: not whole groups of PP 8 for the
  // interleaved schedule (model_parallel_config.py:567-568, schedules.py:1160-1180).
  EXPECT_NE(Refusal(Patched(p, {{"mbs", 8}}), EmitFormat::kMegatron).find("multiple of PP (8)"),
            std::string::npos);
  // --overlap-param-gather without the distributed optimizer (arguments.py:1024-1028).
  EXPECT_NE(Refusal(Patched(p, {{"overlap_param_gather", true}, {"distributed_optimizer", false}}),
                    EmitFormat::kMegatron)
                .find("--overlap-param-gather needs"),
            std::string::npos);
  // --tp-comm-overlap without sequence parallelism (arguments.py:1441-1442).
  EXPECT_NE(Refusal(Patched(p, {{"tp_comm_overlap", true}, {"sp", false}}), EmitFormat::kMegatron)
                .find("--tp-comm-overlap needs --sequence-parallel"),
            std::string::npos);
  // What Megatron-LM cannot express at all.
  EXPECT_NE(Refusal(Patched(p, {{"zero", 3}}), EmitFormat::kMegatron).find("use --format deepspeed"),
            std::string::npos);
  EXPECT_NE(Refusal(Patched(p, {{"tp", nullptr}, {"gx", 2}, {"gy", 2}}), EmitFormat::kMegatron)
                .find("3D tensor grid"),
            std::string::npos);
  EXPECT_NE(Refusal(Patched(p, {{"cp_kind", "fpdt"}}), EmitFormat::kMegatron)
                .find("FPDT"),
            std::string::npos);
}

TEST(EmitRules, DeepSpeedRefusals) {
  const Json p = Load("llama3-8b-deepspeed.plans.json");
  // ZeRO-3 with pipeline parallelism (runtime/pipe/engine.py:76-77).
  EXPECT_NE(Refusal(Patched(p, {{"tp", 1}, {"pp", 2}, {"cp", 1}, {"dp", 32}, {"zero", 3}}),
                    EmitFormat::kDeepSpeed)
                .find("incompatible with pipeline parallelism"),
            std::string::npos);
  // Ring attention is not a DeepSpeed option.
  EXPECT_NE(Refusal(Patched(p, {{"tp", 1}, {"pp", 1}, {"cp", 2}, {"cp_kind", "ring"}, {"dp", 32}}),
                    EmitFormat::kDeepSpeed)
                .find("ring context parallelism"),
            std::string::npos);
  // hpZ groups are consecutive global ranks (utils/groups.py:875-886): not with TP inside.
  EXPECT_NE(Refusal(Patched(p, {{"tp", 2}, {"pp", 1}, {"cp", 1}, {"dp", 32}, {"zero", 3}, {"hpz", true}}),
                    EmitFormat::kDeepSpeed)
                .find("with TP = 2 consecutive ranks hold different tensor shards"),
            std::string::npos);
}

// ZeRO-Offload / ZeRO-Infinity plans become DeepSpeed's offload keys (docs:
// zero_optimization.offload_optimizer / offload_param, device "cpu"); stages
// that cannot offload and frameworks without it refuse.
TEST(EmitRules, DeepSpeedOffloadKeys) {
  const Json p = Load("llama3-8b-deepspeed.plans.json");
  const Json base = {{"tp", 1},      {"pp", 1},      {"cp", 1},
                     {"dp", 64},     {"qwz", false}, {"hpz", false},
                     {"qgz", false}, {"mbs", 1},     {"recompute", "full"}};
  Json z3 = Patched(Patched(p, base),
                    {{"zero", 3}, {"offload_optimizer", true}, {"offload_param", true}});
  const Json ds3 = Json::parse(Emit(z3, EmitFormat::kDeepSpeed));
  EXPECT_EQ(ds3["zero_optimization"]["stage"], 3);
  EXPECT_EQ(ds3["zero_optimization"]["offload_optimizer"]["device"], "cpu");
  EXPECT_EQ(ds3["zero_optimization"]["offload_param"]["device"], "cpu");
  Json z2 = Patched(Patched(p, base),
                    {{"zero", 2}, {"offload_optimizer", true}, {"offload_param", false}});
  const Json ds2 = Json::parse(Emit(z2, EmitFormat::kDeepSpeed));
  EXPECT_EQ(ds2["zero_optimization"]["offload_optimizer"]["device"], "cpu");
  EXPECT_FALSE(ds2["zero_optimization"].contains("offload_param"));
  // Without offload the keys say "none", as before.
  Json plain = Patched(Patched(p, base), {{"zero", 2}, {"offload_optimizer", false}});
  EXPECT_EQ(Json::parse(Emit(
                plain, EmitFormat::kDeepSpeed))["zero_optimization"]["offload_optimizer"]["device"],
            "none");
  EXPECT_NE(Refusal(Patched(z2, {{"offload_param", true}}), EmitFormat::kDeepSpeed)
                .find("needs ZeRO stage 3"),
            std::string::npos);
  EXPECT_NE(Refusal(Patched(z2, {{"zero", 0}}), EmitFormat::kDeepSpeed)
                .find("needs ZeRO stage 1, 2 or 3"),
            std::string::npos);
  const Json m = Load("gpt3-175b-megatron.plans.json");
  EXPECT_NE(Refusal(Patched(m, {{"distributed_optimizer", true}, {"offload_optimizer", true}}),
                    EmitFormat::kMegatron)
                .find("use --format deepspeed"),
            std::string::npos);
}

TEST(EmitRules, AxonnRefusals) {
  const Json p = Load("axonn-20b-axonn.plans.json");
  EXPECT_NE(Refusal(Patched(p, {{"cp", 2}, {"dp", 1}}), EmitFormat::kAxonn).find("no context"), std::string::npos);
  EXPECT_NE(Refusal(Patched(p, {{"zero", 1}}), EmitFormat::kAxonn).find("not with ZeRO"), std::string::npos);
  // AxoNN's rank layout is fixed: x, y, z, inter, data (communication.py).
  EXPECT_NE(Refusal(Patched(p, {{"placement", "data-x-y-cp-z-pp"}}), EmitFormat::kAxonn).find("rank order"),
            std::string::npos);
}

TEST(EmitRules, TorchtitanRefusals) {
  const Json p = Load("llama3-70b-fsdp.plans.json");
  EXPECT_NE(Refusal(Patched(p, {{"zero", 1}}), EmitFormat::kTorchtitan).find("FSDP2"), std::string::npos);
  EXPECT_NE(Refusal(Patched(p, {{"cp", 2}, {"cp_kind", "ulysses"}, {"gz", 32}}), EmitFormat::kTorchtitan)
                .find("ring attention"),
            std::string::npos);
}

TEST(EmitApi, FormatsRanksAndDefaults) {
  for (const char* n : {"megatron", "deepspeed", "axonn", "torchtitan", "env", "json"}) {
    auto f = ParseEmitFormat(n);
    ASSERT_TRUE(f.ok()) << n;
    EXPECT_STREQ(EmitFormatName(*f), n);
  }
  EXPECT_FALSE(ParseEmitFormat("nemo").ok());
  const Json p = Load("gpt3-175b-megatron.plans.json");
  const int n = static_cast<int>(p["candidates"].size());
  EXPECT_FALSE(EmitConfig(p, 0, EmitFormat::kEnv).ok());
  EXPECT_FALSE(EmitConfig(p, n + 1, EmitFormat::kEnv).ok());
  EXPECT_TRUE(EmitConfig(p, n, EmitFormat::kEnv).ok());
  Json not_plans = {{"schema", "paratune.prediction/v1"}};
  EXPECT_EQ(EmitConfig(not_plans, 1, EmitFormat::kEnv).status().code(), StatusCode::kInvalidArgument);
  // Wrong JSON types anywhere are bad input, never an exception.
  for (const char* bad : {R"({"schema": 1})", R"([1, 2])", R"("plans")"}) {
    EXPECT_EQ(EmitConfig(Json::parse(bad), 1, EmitFormat::kEnv).status().code(), StatusCode::kInvalidArgument)
        << bad;
  }
  Json odd = p;
  odd["candidates"][0]["config"]["tp"] = "four";
  EXPECT_EQ(EmitConfig(odd, 1, EmitFormat::kMegatron).status().code(), StatusCode::kInvalidArgument);
  odd = p;
  odd["candidates"][0] = 7;
  EXPECT_EQ(EmitConfig(odd, 1, EmitFormat::kMegatron).status().code(), StatusCode::kInvalidArgument);
  odd = p;
  odd["candidates"][0]["prediction"] = "fast";
  EXPECT_TRUE(EmitConfig(odd, 1, EmitFormat::kMegatron).ok());  // the header just omits the numbers
  EXPECT_EQ(DefaultEmitFormat(Json::parse("[]")), EmitFormat::kMegatron);
  // Defaults: the framework the plan was made for, else its space.
  EXPECT_EQ(DefaultEmitFormat(p), EmitFormat::kMegatron);
  EXPECT_EQ(DefaultEmitFormat(Load("llama3-8b-deepspeed.plans.json")), EmitFormat::kDeepSpeed);
  EXPECT_EQ(DefaultEmitFormat(Load("axonn-20b-axonn.plans.json")), EmitFormat::kAxonn);
  EXPECT_EQ(DefaultEmitFormat(Load("llama3-70b-fsdp.plans.json")), EmitFormat::kTorchtitan);
  for (auto [fw, want] : {std::pair{"megatron", EmitFormat::kMegatron},
                          {"megatron-deepspeed", EmitFormat::kDeepSpeed},
                          {"deepspeed", EmitFormat::kDeepSpeed}, {"fsdp", EmitFormat::kTorchtitan},
                          {"torchtitan", EmitFormat::kTorchtitan}, {"axonn", EmitFormat::kAxonn}}) {
    Json q = Load("llama3-8b-deepspeed.plans.json");
    q["job"]["training"]["framework"] = fw;
    EXPECT_EQ(DefaultEmitFormat(q), want) << fw;
  }
}

}  // namespace
}  // namespace paratune::planner
