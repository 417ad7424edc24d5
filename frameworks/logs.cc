// Reading training logs: Megatron-LM (and NeMo), Megatron-DeepSpeed, DeepSpeed,
// torchtitan and Hugging Face Trainer output (rank prefixes, ANSI colours,
// argument dumps, per-step lines) into a LoggedRun and its step summary. The calibration from a run is
// log_calibration.cc.
#include "frameworks/logs.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>

#include "common/enum_names.h"
#include "common/strings.h"
#include "planner/config.h"
#include "planner/cost_model.h"
#include "planner/model.h"

namespace paratune::planner {
namespace {

// By value, in the order of LogFormat's declaration (logs.h).
constexpr const char* kLogFormatNames[] = {"megatron", "megatron-deepspeed", "deepspeed",
                                           "torchtitan", "hf-trainer"};

// ---------------------------------------------------------------------------
// Lines.

// Removes ANSI colour codes (torchtitan colours its step lines).
std::string StripAnsi(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\x1b' && i + 1 < s.size() && s[i + 1] == '[') {
      size_t j = i + 2;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == ';')) ++j;
      if (j < s.size()) {
        i = j;  // skips the final letter too
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

struct Line {
  std::string text;  // without rank prefix and colours
  int rank = -1;     // from a prefix; -1 = none
  int number = 0;    // 1-based line number in the log
};

// Strips the launcher prefixes that tag a line with its rank: torchrun
// --tee/--log-dir ("[rank3]:", "[default3]:"), srun -l ("3: "), Open MPI
// --tag-output ("[1,3]<stdout>:").
Line SplitRank(std::string s) {
  static const std::regex kPrefixes[] = {
      std::regex(R"(^\[rank(\d+)\]:\s?)"),
      std::regex(R"(^\[default(\d+)\]:\s?)"),
      std::regex(R"(^\[\d+,(\d+)\]<std(?:out|err)>:\s?)"),
      std::regex(R"(^\s*(\d{1,5}): )"),
  };
  Line line;
  // Cheap test first: the regexes run only on lines that could carry a prefix.
  const size_t first = s.find_first_not_of(' ');
  if (first == std::string::npos ||
      !(s[first] == '[' || std::isdigit(static_cast<unsigned char>(s[first])))) {
    line.text = std::move(s);
    return line;
  }
  for (const std::regex& re : kPrefixes) {
    std::smatch m;
    if (std::regex_search(s, m, re)) {
      line.rank = std::stoi(m[1].str());
      s = m.suffix().str();
      break;
    }
  }
  line.text = std::move(s);
  return line;
}

std::vector<Line> SplitLines(std::string_view text) {
  std::vector<Line> out;
  size_t start = 0;
  int number = 0;
  while (start <= text.size()) {
    ++number;
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view raw = text.substr(start, end - start);
    if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
    if (!raw.empty()) {
      out.push_back(SplitRank(StripAnsi(raw)));
      out.back().number = number;
    }
    if (end == text.size()) break;
    start = end + 1;
  }
  return out;
}

std::optional<double> ToNumber(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), ','), s.end());
  if (s.empty()) return std::nullopt;
  try {
    size_t used = 0;
    const double v = std::stod(s, &used);
    if (used != s.size() || !std::isfinite(v)) return std::nullopt;
    return v;
  } catch (...) {
    return std::nullopt;
  }
}

std::optional<int> ToInt(const std::string& s) {
  auto v = ToNumber(s);
  if (!v || *v != std::floor(*v) || std::fabs(*v) > 2e9) return std::nullopt;
  return static_cast<int>(*v);
}

std::optional<bool> ToBool(const std::string& s) {
  if (s == "True" || s == "true") return true;
  if (s == "False" || s == "false") return false;
  return std::nullopt;
}

// "  key ........ value" (Megatron's arguments block; DeepSpeed's config
// print after its "[config.py:NNN:print]" tag; GPT-NeoX/Megatron-DeepSpeed's
// "value.....default" variant). First occurrence wins.
void ReadKeyValue(const std::string& text, std::map<std::string, std::string>* kv) {
  static const std::regex kRe(R"((?:^|\s)([A-Za-z_][A-Za-z0-9_]*) \.{2,}\s*(.*?)\s*$)");
  std::smatch m;
  if (!std::regex_search(text, m, kRe)) return;
  std::string value = m[2].str();
  static const std::regex kTrail(R"(\.{2,}(?:default|updated)$)");
  value = std::regex_replace(value, kTrail, "");
  kv->emplace(m[1].str(), value);
}

// ---------------------------------------------------------------------------
// Interpreting the key/value settings (Megatron arguments, DeepSpeed config).

struct KvReader {
  const std::map<std::string, std::string>& kv;
  std::optional<std::string> Str(const char* key) const {
    auto it = kv.find(key);
    if (it == kv.end() || it->second == "None" || it->second.empty()) return std::nullopt;
    return it->second;
  }
  std::optional<int> Int(const char* key) const {
    auto s = Str(key);
    return s ? ToInt(*s) : std::nullopt;
  }
  std::optional<double> Num(const char* key) const {
    auto s = Str(key);
    return s ? ToNumber(*s) : std::nullopt;
  }
  std::optional<bool> Bool(const char* key) const {
    auto s = Str(key);
    return s ? ToBool(*s) : std::nullopt;
  }
};

template <typename T>
void SetIf(std::optional<T>* field, std::optional<T> v) {
  if (!*field && v) *field = v;
}

// Arguments printed whether or not they take effect. Megatron-DeepSpeed's
// argparse prints zero_stage (default 1.0) in every run; it applies only when
// DeepSpeed drives the run (--deepspeed, printed "deepspeed .... True", or
// the engine's own markers that made the log a Megatron-DeepSpeed one).
// Megatron-LM turns sequence_parallel off when tp is 1 (arguments.py:
// "if args.tensor_model_parallel_size == 1: args.sequence_parallel = False").
void IgnoreInactiveMegatronArgs(const KvReader& r, LoggedRun* run) {
  if (auto z = r.Int("zero_stage")) {
    const bool deepspeed =
        r.Bool("deepspeed").value_or(run->format == LogFormat::kMegatronDeepSpeed);
    if (deepspeed) {
      SetIf(&run->zero, z);
    } else {
      run->notes.push_back("zero_stage " + std::to_string(*z) +
                           " ignored: DeepSpeed is not enabled in this run");
    }
  }
  if (run->sp.value_or(false) && run->tp == 1) {
    run->sp = false;
    run->notes.push_back("sequence_parallel ignored: tensor parallel size 1");
  }
}

void InterpretMegatronArgs(const KvReader& r, LoggedRun* run) {
  SetIf(&run->layers, r.Int("num_layers"));
  SetIf(&run->hidden, r.Int("hidden_size"));
  SetIf(&run->ffn_hidden, r.Int("ffn_hidden_size"));
  SetIf(&run->heads, r.Int("num_attention_heads"));
  if (r.Bool("group_query_attention").value_or(false))
    SetIf(&run->kv_heads, r.Int("num_query_groups"));
  SetIf(&run->seq_len, r.Int("seq_length"));
  SetIf(&run->max_positions, r.Int("max_position_embeddings"));
  if (auto v = r.Int("micro_batch_size")) SetIf(&run->micro_batch, std::optional<int64_t>(*v));
  if (auto v = r.Int("global_batch_size")) SetIf(&run->global_batch, std::optional<int64_t>(*v));
  SetIf(&run->tp, r.Int("tensor_model_parallel_size"));
  SetIf(&run->pp, r.Int("pipeline_model_parallel_size"));
  SetIf(&run->vpp, r.Int("virtual_pipeline_model_parallel_size"));
  if (!run->vpp) {
    auto per = r.Int("num_layers_per_virtual_pipeline_stage");
    auto layers = r.Int("num_layers");
    auto pp = r.Int("pipeline_model_parallel_size");
    if (per && layers && pp && *per > 0 && *pp > 0 && *layers % (*per * *pp) == 0) {
      run->vpp = *layers / (*per * *pp);
    }
  }
  SetIf(&run->cp, r.Int("context_parallel_size"));
  SetIf(&run->world_size, r.Int("world_size"));
  SetIf(&run->sp, r.Bool("sequence_parallel"));
  SetIf(&run->distributed_optimizer, r.Bool("use_distributed_optimizer"));
  SetIf(&run->overlap_grad_reduce, r.Bool("overlap_grad_reduce"));
  SetIf(&run->overlap_param_gather, r.Bool("overlap_param_gather"));
  SetIf(&run->tp_comm_overlap, r.Bool("tp_comm_overlap"));
  if (auto g = r.Str("recompute_granularity")) {
    if (*g == "full" || *g == "selective") run->recompute = *g;
  } else if (r.kv.count("recompute_granularity")) {
    // Printed as None: no recomputation, unless an older flag below says so.
    if (r.Bool("recompute_activations").value_or(false)) {
      run->recompute = "selective";
    } else if (r.Bool("checkpoint_activations").value_or(false)) {
      run->recompute = "full";
    } else {
      run->recompute = "none";
    }
  } else if (auto ca = r.Bool("checkpoint_activations")) {
    run->recompute = *ca ? "full" : "none";  // Megatron-LM before 2022, Megatron-DeepSpeed
  }
  SetIf(&run->swiglu, r.Bool("swiglu"));
  SetIf(&run->untied_embeddings, r.Bool("untie_embeddings_and_output_weights"));
  if (auto n = r.Str("normalization")) run->rmsnorm = (*n == "RMSNorm");
  SetIf(&run->linear_bias, r.Bool("add_bias_linear"));
  {
    auto hd = r.Num("hidden_dropout");
    auto ad = r.Num("attention_dropout");
    if (hd || ad) run->dropout = hd.value_or(0) > 0 || ad.value_or(0) > 0;
  }
  SetIf(&run->vocab, r.Int("padded_vocab_size"));
  if (auto bf = r.Bool("bf16"); bf && *bf) run->precision = "bf16";
  if (auto fp = r.Bool("fp16"); fp && *fp && !run->precision) run->precision = "fp16";
  if (!run->precision && r.kv.count("bf16") && r.kv.count("fp16")) run->precision = "fp32";
  IgnoreInactiveMegatronArgs(r, run);
}

// Megatron's moe_layer_freq as printed: an int k (layer i is MoE when i % k == 0,
// megatron/core/models/gpt/gpt_layer_specs.py:647-650 at NVIDIA/Megatron-LM
// d98e8a64) or a list of 0/1 per layer ("[0, 0, 0, 1, 1, ...]"). Returns the 0/1
// pattern, or empty when the value is neither.
std::vector<int> MoeLayerPattern(const std::string& value, int layers) {
  std::vector<int> pattern;
  if (auto k = ToInt(value)) {
    if (*k < 1 || layers < 1) return {};
    for (int i = 0; i < layers; ++i) pattern.push_back(i % *k == 0 ? 1 : 0);
    return pattern;
  }
  if (value.size() < 2 || value.front() != '[' || value.back() != ']') return {};
  for (const std::string& part : Split(value.substr(1, value.size() - 2), ',')) {
    auto v = ToInt(Trim(part));
    if (!v || (*v != 0 && *v != 1)) return {};
    pattern.push_back(*v);
  }
  if (static_cast<int>(pattern.size()) != layers) return {};
  return pattern;
}

// The model description's form of a pattern: `first` leading dense layers, then
// layer i is MoE when (i + 1) % step == 0. False when the pattern has another shape.
bool PatternAsFirstDenseAndStep(const std::vector<int>& pattern, int* first, int* step) {
  const int n = static_cast<int>(pattern.size());
  int f = 0;
  while (f < n && pattern[f] == 0) ++f;
  if (f == n) return false;
  for (int s = 1; s <= n; ++s) {
    bool fits = true;
    for (int i = f; i < n && fits; ++i) fits = pattern[i] == ((i + 1) % s == 0 ? 1 : 0);
    if (fits) {
      *first = f;
      *step = s;
      return true;
    }
  }
  return false;
}

// Megatron-Core's MoE arguments as _print_args prints them (one "name .... value"
// line per argparse dest, megatron/training/arguments.py:1990-2001 at d98e8a64):
// num_experts (--num-experts), moe_router_topk, moe_ffn_hidden_size (set to
// ffn_hidden_size when not given, arguments.py:1650-1651),
// moe_shared_expert_intermediate_size, moe_layer_freq, expert_model_parallel_size,
// expert_tensor_parallel_size (tp when not given, arguments.py:587-588),
// moe_token_dispatcher_type and moe_flex_dispatcher_backend
// (transformer_config.py:891,898), moe_expert_capacity_factor (None = dropless),
// moe_router_score_function, moe_grouped_gemm, moe_permute_fusion,
// overlap_moe_expert_parallel_comm, mtp_num_layers and kv_channels.
void InterpretMegatronMoeArgs(const KvReader& r, LoggedRun* run) {
  auto experts = r.Int("num_experts");
  if (!experts || *experts < 1) return;
  SetIf(&run->experts, experts);
  SetIf(&run->top_k, r.Int("moe_router_topk"));
  SetIf(&run->moe_ffn_hidden, r.Int("moe_ffn_hidden_size"));
  if (!run->moe_ffn_hidden) SetIf(&run->moe_ffn_hidden, r.Int("ffn_hidden_size"));
  SetIf(&run->shared_ffn_hidden, r.Int("moe_shared_expert_intermediate_size"));
  if (auto freq = r.Str("moe_layer_freq"); freq && run->layers) {
    const std::vector<int> pattern = MoeLayerPattern(*freq, *run->layers);
    int first = 0, step = 1;
    if (!pattern.empty() && PatternAsFirstDenseAndStep(pattern, &first, &step)) {
      run->first_dense_layers = first;
      run->moe_layer_step = step;
    } else {
      run->notes.push_back("moe_layer_freq " + *freq +
                           " is not leading dense layers plus a fixed step; pass --model");
    }
  }
  SetIf(&run->ep, r.Int("expert_model_parallel_size"));
  SetIf(&run->etp, r.Int("expert_tensor_parallel_size"));
  if (!run->etp) SetIf(&run->etp, r.Int("tensor_model_parallel_size"));
  if (auto d = r.Str("moe_token_dispatcher_type")) {
    if (*d == "alltoall" || *d == "allgather") {
      run->moe_dispatcher = *d;
    } else if (*d == "flex") {
      auto backend = r.Str("moe_flex_dispatcher_backend").value_or("deepep");
      if (backend == "deepep" || backend == "hybridep") run->moe_dispatcher = backend;
    }
  }
  if (auto c = r.Num("moe_expert_capacity_factor")) run->capacity_factor = *c;
  if (auto f = r.Str("moe_router_score_function"); f && (*f == "softmax" || *f == "sigmoid")) {
    run->router = *f;
  }
  SetIf(&run->moe_grouped_gemm, r.Bool("moe_grouped_gemm"));
  SetIf(&run->moe_permute_fusion, r.Bool("moe_permute_fusion"));
  SetIf(&run->moe_a2a_overlap, r.Bool("overlap_moe_expert_parallel_comm"));
  SetIf(&run->mtp_layers, r.Int("mtp_num_layers"));
  SetIf(&run->head_dim, r.Int("kv_channels"));
}

void InterpretDeepSpeedConfig(const KvReader& r, LoggedRun* run) {
  if (auto v = r.Int("train_batch_size")) SetIf(&run->global_batch, std::optional<int64_t>(*v));
  if (auto v = r.Int("train_micro_batch_size_per_gpu")) {
    SetIf(&run->micro_batch, std::optional<int64_t>(*v));
  }
  SetIf(&run->world_size, r.Int("world_size"));
  SetIf(&run->zero, r.Int("zero_optimization_stage"));
  if (!run->zero) {
    if (auto zc = r.Str("zero_config")) {
      static const std::regex kStage(R"(stage=(\d))");
      std::smatch m;
      if (std::regex_search(*zc, m, kStage)) run->zero = std::stoi(m[1].str());
    }
  }
  // ZeRO-Offload: the zero_config print names each offload's device
  // (DeepSpeedZeroOffloadOptimizerConfig(device='cpu', ...); older releases
  // print the JSON, "offload_optimizer": {"device": "cpu", ...}).
  if (auto zc = r.Str("zero_config")) {
    static const std::regex kOffOpt(
        R"re(offload_optimizer["']?\s*[=:]\s*(?:\w+\(|\{)[^)}]*device["']?\s*[=:]\s*["'](cpu|nvme)["'])re");
    static const std::regex kOffParam(
        R"re(offload_param["']?\s*[=:]\s*(?:\w+\(|\{)[^)}]*device["']?\s*[=:]\s*["'](cpu|nvme)["'])re");
    std::smatch m;
    if (std::regex_search(*zc, m, kOffOpt)) run->offload_optimizer = true;
    if (std::regex_search(*zc, m, kOffParam)) run->offload_param = true;
  }
  if (r.Bool("zero_cpu_offload").value_or(false))
    SetIf(&run->offload_optimizer, std::optional<bool>(true));
  if (r.Bool("bfloat16_enabled").value_or(false) || r.Bool("bf16_enabled").value_or(false)) {
    run->precision = "bf16";
  } else if (r.Bool("fp16_enabled").value_or(false) && !run->precision) {
    run->precision = "fp16";
  }
}

// The float8 recipe torchtitan names in "Float8 training active with recipe
// R" (components/quantization/float8.py) as a paratune precision: tensorwise
// is dynamic per-tensor scaling (fp8_current); rowwise and
// rowwise_with_gw_hp scale per row, finer than per tensor, which paratune
// prices as its fine-grained recipe (fp8_blockwise); MX recipes are mxfp8.
std::string TitanFloat8Precision(const std::string& recipe) {
  if (recipe.rfind("rowwise", 0) == 0) return "fp8_blockwise";
  if (recipe.rfind("mxfp8", 0) == 0) return "mxfp8";
  return "fp8_current";
}

// torchtitan's "Running with args: {...}" dict (printed with job.print_args;
// a Python dict, the parallelism keys under 'training' in 2024 releases and
// under 'parallelism' since): each key read on its own, wherever it nests.
void ReadTitanArgs(const std::string& s, LoggedRun* run, std::optional<std::string>* dp_type) {
  auto num = [&](const char* key) -> std::optional<int> {
    const std::regex re(std::string("'") + key + R"(': (-?\d+))");
    std::smatch m;
    if (!std::regex_search(s, m, re)) return std::nullopt;
    return ToInt(m[1].str());
  };
  auto str = [&](const char* key) -> std::optional<std::string> {
    const std::regex re(std::string("'") + key + R"(': '([^']*)')");
    std::smatch m;
    if (!std::regex_search(s, m, re)) return std::nullopt;
    return m[1].str();
  };
  SetIf(&run->dp_shard, num("data_parallel_shard_degree"));
  SetIf(&run->dp_replicate, num("data_parallel_replicate_degree"));
  // Releases before the shard/replicate split: one degree and its type.
  if (auto d = num("data_parallel_degree")) {
    *dp_type = str("data_parallel_type").value_or("fsdp");
    if (*dp_type == "ddp") SetIf(&run->dp_replicate, d);
    else SetIf(&run->dp_shard, d);
  }
  if (auto v = num("tensor_parallel_degree")) SetIf(&run->tp, std::optional<int>(*v));
  SetIf(&run->pp, num("pipeline_parallel_degree"));
  SetIf(&run->cp, num("context_parallel_degree"));
  SetIf(&run->seq_len, num("seq_len"));
  auto local = num("local_batch_size");
  if (!local) local = num("batch_size");
  if (local && *local > 0) SetIf(&run->micro_batch, std::optional<int64_t>(*local));
  if (auto g = num("global_batch_size"); g && *g > 0) {
    SetIf(&run->global_batch, std::optional<int64_t>(*g));
  }
  if (auto mp = str("mixed_precision_param")) {
    if (*mp == "bfloat16") run->precision = "bf16";
    if (*mp == "float32") run->precision = "fp32";
  }
}

// One run's section of a log, read line by line. A log holds several runs
// when a job was restarted or several jobs wrote to one file: a section ends
// where a framework's start-of-run banner appears after step lines or the
// step counter goes back.
class RunReader {
 public:
  RunReader(LogFormat format, StepUnit unit, int first_line) {
    run_.format = format;
    run_.unit = unit;
    run_.first_line = first_line;
    run_.whole_run_average = format == LogFormat::kHfTrainer ||
                             (format == LogFormat::kDeepSpeed && unit == StepUnit::kSeconds);
  }

  // True when `l` opens a new run rather than continuing this one: a banner
  // of the rank whose step lines are read, after its step lines. (Before the
  // first step every rank prints its banners, some several times.)
  bool StartsNewRun(const Line& l) const {
    return !run_.steps.empty() && l.rank == step_rank_ && BannerKind(l.text) != nullptr;
  }
  // True when `l` is a step line of the step rank whose number is below the
  // last one's: the counter restarted, a new run without a banner.
  bool RestartsSteps(const Line& l) const;

  void Read(const Line& l);
  // The run, with what the section's key/value settings state.
  LoggedRun Finish();
  bool HasSteps() const { return !run_.steps.empty(); }

 private:
  static const char* BannerKind(const std::string& s);
  bool FromStepRank(const Line& l) {
    if (step_rank_ == -2) step_rank_ = l.rank;
    return l.rank == step_rank_;
  }
  void Add(LogStep s) {
    if (s.iteration > 0) {
      if (!seen_.insert(s.iteration).second) {
        ++duplicates_;
        return;
      }
      last_iteration_ = s.iteration;
    }
    run_.steps.push_back(s);
  }
  void ReadMegatron(const Line& l);
  void ReadTitan(const Line& l);
  void ReadTitanMesh(const std::string& names, const std::string& sizes);
  void ReadDeepSpeed(const Line& l);
  void ReadHf(const Line& l);
  void FinishTitan();

  LoggedRun run_;
  std::map<std::string, std::string> kv_;
  std::set<int> ranks_;
  int step_rank_ = -2;    // the rank whose step lines are read (-2 = none yet)
  std::set<int64_t> seen_;
  int64_t last_iteration_ = 0;
  int duplicates_ = 0;
  int64_t ds_skipped_ = -1;  // DeepSpeed's running skipped count
  bool ds_new_skip_ = false;
  std::optional<int64_t> hf_total_steps_;
  std::optional<std::string> device_, float8_recipe_, titan_dp_type_;
  std::optional<int> titan_mesh_dp_;  // a mesh dimension named "dp" (releases before dp_shard)
};

// The lines that open a run, per framework: Megatron's "using world size"
// line and arguments header; torchtitan's "Starting job", args dict, device
// mesh and "Training starts" lines; DeepSpeed's info banner and engine
// configuration header; the Hugging Face Trainer's "Running training" block.
const char* RunReader::BannerKind(const std::string& s) {
  static constexpr std::pair<const char*, const char*> kBanners[] = {
      {"using world size:", "megatron-world"},
      {"------ arguments ------", "megatron-args"},
      {"Starting job:", "titan-job"},
      {"Running with args:", "titan-args"},
      {"device mesh", "titan-mesh"},
      {"Training starts at step", "titan-start"},
      {"DeepSpeed info:", "ds-info"},
      {"DeepSpeedEngine configuration:", "ds-config"},
      {"***** Running training *****", "hf-start"},
  };
  for (const auto& [marker, kind] : kBanners) {
    if (Contains(s, marker)) return kind;
  }
  return nullptr;
}

bool RunReader::RestartsSteps(const Line& l) const {
  static const std::regex kMegIter(R"(iteration\s+(\d+)\s*/)");
  static const std::regex kNemoStep(R"(global_step[:=]\s*([0-9.]+))");
  static const std::regex kTitanStep(R"(step:\s*(\d+)\s+loss:)");
  static const std::regex kDsStep(R"((?:global_step=(\d+),)|(?:\d+/(\d+), SamplesPerSec=))");
  if (last_iteration_ == 0 || (step_rank_ != -2 && l.rank != step_rank_)) return false;
  const std::string& s = l.text;
  std::smatch m;
  std::optional<double> it;
  switch (run_.format) {
    case LogFormat::kMegatron:
    case LogFormat::kMegatronDeepSpeed:
      if (Contains(s, "elapsed time per iteration") && std::regex_search(s, m, kMegIter)) {
        it = ToNumber(m[1].str());
      } else if (Contains(s, "train_step_timing") && std::regex_search(s, m, kNemoStep)) {
        it = ToNumber(m[1].str());
      }
      break;
    case LogFormat::kTorchtitan:
      if (Contains(s, "tps:") && std::regex_search(s, m, kTitanStep)) it = ToNumber(m[1].str());
      break;
    case LogFormat::kDeepSpeed:
      if (Contains(s, "SamplesPerSec=") && std::regex_search(s, m, kDsStep)) {
        it = ToNumber(m[1].matched ? m[1].str() : m[2].str());
      }
      break;
    case LogFormat::kHfTrainer:
      break;
  }
  return it && *it > 0 && *it < static_cast<double>(last_iteration_);
}

void RunReader::Read(const Line& l) {
  const std::string& s = l.text;
  if (l.rank >= 0) ranks_.insert(l.rank);
  if (Contains(s, " ..")) ReadKeyValue(s, &kv_);
  // The GPU, where some line names the device (torch.cuda.get_device_name,
  // nvidia-smi, torchtitan's "GPU capacity" line).
  if (!device_ && Contains(s, "NVIDIA ")) {
    static const std::regex kDevice(R"(NVIDIA (?:GH200|H200|H100|A100|V100)[-A-Za-z0-9 ]*)");
    std::smatch m;
    if (std::regex_search(s, m, kDevice)) device_ = Trim(m[0].str());
  }
  switch (run_.format) {
    case LogFormat::kMegatron:
    case LogFormat::kMegatronDeepSpeed:
      ReadMegatron(l);
      break;
    case LogFormat::kTorchtitan:
      ReadTitan(l);
      break;
    case LogFormat::kDeepSpeed:
      ReadDeepSpeed(l);
      ReadHf(l);
      break;
    case LogFormat::kHfTrainer:
      ReadHf(l);
      break;
  }
}

void RunReader::ReadMegatron(const Line& l) {
  static const std::regex kMegIter(
      R"(iteration\s+(\d+)\s*/\s*\d+\s*\|.*?elapsed time per iteration \(ms\):\s*([0-9.eE+-]+))");
  static const std::regex kNemoStep(R"(train_step_timing in s[:=]\s*([0-9.eE+-]+))");
  static const std::regex kNemoGlobalStep(R"(global_step[:=]\s*([0-9.]+))");
  static const std::regex kNemoBatch(R"(global_batch_size[:=]\s*(\d+))");
  static const std::regex kMegSkipped(R"(number of skipped iterations:\s*(\d+))");
  static const std::regex kMegBatch(R"(global batch size:\s*(\d+))");
  static const std::regex kWorld(R"(using world size:\s*(\d+))");
  static const std::regex kTpSize(R"(tensor-model-parallel size:\s*(\d+))");
  static const std::regex kPpSize(R"(pipeline-model-parallel size:\s*(\d+))");
  static const std::regex kCpSize(R"((?:^|[^-])context-parallel size:\s*(\d+))");
  static const std::regex kPaddedVocab(
      R"(padded vocab \(size: \d+\) with \d+ dummy tokens \(new size: (\d+)\))");
  const std::string& s = l.text;
  std::smatch m;
  if (Contains(s, "train_step_timing in s") && std::regex_search(s, m, kNemoStep)) {
    if (!FromStepRank(l)) return;
    LogStep st;
    st.value = std::stod(m[1].str());
    std::smatch k;
    if (std::regex_search(s, k, kNemoGlobalStep)) {
      st.iteration = static_cast<int64_t>(std::stod(k[1].str()));
    }
    if (std::regex_search(s, k, kNemoBatch) && !run_.global_batch) {
      run_.global_batch = std::stoll(k[1].str());
    }
    Add(st);
  } else if (Contains(s, "elapsed time per iteration") && std::regex_search(s, m, kMegIter)) {
    if (!FromStepRank(l)) return;
    LogStep st;
    st.iteration = std::stoll(m[1].str());
    st.value = std::stod(m[2].str()) / 1000.0;
    std::smatch k;
    if (std::regex_search(s, k, kMegSkipped)) st.skipped = std::stoi(k[1].str()) > 0;
    if (std::regex_search(s, k, kMegBatch) && !run_.global_batch) {
      run_.global_batch = std::stoll(k[1].str());
    }
    Add(st);
  } else if (Contains(s, "using world size") && std::regex_search(s, m, kWorld)) {
    run_.world_size = std::stoi(m[1].str());
    std::smatch k;
    if (std::regex_search(s, k, kTpSize)) run_.tp = std::stoi(k[1].str());
    if (std::regex_search(s, k, kPpSize)) run_.pp = std::stoi(k[1].str());
    if (std::regex_search(s, k, kCpSize)) run_.cp = std::stoi(k[1].str());
  } else if (Contains(s, "padded vocab") && std::regex_search(s, m, kPaddedVocab)) {
    run_.vocab = std::stoi(m[1].str());
  }
}

void RunReader::ReadTitan(const Line& l) {
  static const std::regex kTitanStep(R"(step:\s*(\d+)\s+loss:.*?tps:\s*([0-9,]+))");
  // torchtitan's start-up line has changed over releases ("Training starts at
  // step 1, with local batch size 8, global batch size 64, total steps ...",
  // "... gradient accumulation steps 1, sequence length 2048, ..."): each
  // field is read on its own.
  static const std::regex kTitanLocal(R"(local batch size (\d+))");
  static const std::regex kTitanGlobal(R"(global batch size (\d+))");
  static const std::regex kTitanSeq(R"(sequence length (\d+))");
  static const std::regex kTitanAccum(R"(grad(?:ient|eint) accumulation steps (\d+))");
  static const std::regex kTitanMesh(
      R"(Building \d-D device mesh with \[([^\]]*)\], \[([0-9, ]*)\])");
  // torchtitan's mesh line since it has expert parallelism
  // (torchtitan/distributed/parallel_dims.py:274-278 at pytorch/torchtitan b5bcd76c).
  static const std::regex kTitanParallelism(
      R"(Building device mesh with parallelism: pp=(\d+), dp_replicate=(\d+), dp_shard=(-?\d+), cp=(\d+), tp=(\d+), ep=(\d+))");
  // torchtitan's token-based batch line (torchtitan/trainer.py:621-629 at b5bcd76c).
  static const std::regex kTitanTokens(
      R"(Trainer is initialized with (\d+) tokens per DP rank, (\d+) tokens per train step, gradient accumulation steps (\d+), maximum context length (\d+))");
  static const std::regex kTitanGpu(R"(GPU capacity: (.+?) \(\d+\) with)");
  static const std::regex kFloat8(R"(Float8 training active with recipe (\w+))");
  const std::string& s = l.text;
  std::smatch m;
  if (Contains(s, "tps:") && std::regex_search(s, m, kTitanStep)) {
    if (!FromStepRank(l)) return;
    LogStep st;
    st.iteration = std::stoll(m[1].str());
    st.value = ToNumber(m[2].str()).value_or(0);
    Add(st);
  } else if (Contains(s, "local batch size") && std::regex_search(s, m, kTitanLocal)) {
    run_.micro_batch = std::stoll(m[1].str());
    if (std::regex_search(s, m, kTitanGlobal)) run_.global_batch = std::stoll(m[1].str());
    if (std::regex_search(s, m, kTitanSeq)) run_.seq_len = std::stoi(m[1].str());
    if (std::regex_search(s, m, kTitanAccum)) run_.grad_accumulation = std::stoi(m[1].str());
  } else if (Contains(s, "Trainer is initialized") && std::regex_search(s, m, kTitanTokens)) {
    const int64_t per_dp = std::stoll(m[1].str()), per_step = std::stoll(m[2].str());
    const int64_t seq = std::stoll(m[4].str());
    if (seq > 0 && per_step % seq == 0) {
      run_.seq_len = static_cast<int>(seq);
      run_.global_batch = per_step / seq;
      // Tokens per DP rank cover all pipeline micro-batches of one
      // accumulation step: the micro-batch is known without a pipeline.
      if (run_.pp.value_or(1) == 1 && per_dp % seq == 0) run_.micro_batch = per_dp / seq;
    }
  } else if (Contains(s, "with parallelism:") && std::regex_search(s, m, kTitanParallelism)) {
    const int pp = std::stoi(m[1].str()), dp_replicate = std::stoi(m[2].str());
    const int dp_shard = std::stoi(m[3].str()), cp = std::stoi(m[4].str());
    const int tp = std::stoi(m[5].str()), ep = std::stoi(m[6].str());
    run_.pp = pp;
    run_.cp = cp;
    run_.tp = tp;
    run_.sp = tp > 1;  // torchtitan's TP always shards norms (SP)
    run_.dp_replicate = dp_replicate;
    run_.dp_shard = dp_shard;  // -1: every rank the other degrees leave
    if (dp_shard != 1) run_.zero = 3;  // FSDP2 over the shard group
    if (dp_shard > 0) run_.dp_degree = dp_replicate * dp_shard;
    if (ep > 1) {
      // The experts' mesh is (pp, dp_replicate, efsdp, ep) with efsdp =
      // dp_shard·cp·tp / ep (parallel_dims.py:282,328): EP borrows from the
      // data, context and tensor ranks and the experts are not TP-split.
      run_.ep = ep;
      run_.etp = 1;
    }
    if (!run_.world_size && dp_shard > 0) {
      run_.world_size = pp * dp_replicate * dp_shard * cp * tp;
    }
  } else if (Contains(s, "device mesh") && std::regex_search(s, m, kTitanMesh)) {
    ReadTitanMesh(m[1].str(), m[2].str());
  } else if (Contains(s, "GPU capacity") && std::regex_search(s, m, kTitanGpu)) {
    run_.gpu_device = m[1].str();
  } else if (Contains(s, "Float8") && std::regex_search(s, m, kFloat8)) {
    float8_recipe_ = m[1].str();
  } else if (Contains(s, "Float8 tensorwise scaled training active")) {
    float8_recipe_ = "tensorwise";
  } else if (Contains(s, "Running with args:")) {
    ReadTitanArgs(s, &run_, &titan_dp_type_);
  }
}

// "Building N-D device mesh with ['dp_shard', 'tp'], [4, 2]": the mesh's
// dimension names and sizes, outermost first (parallel_dims.py build_mesh).
void RunReader::ReadTitanMesh(const std::string& name_list, const std::string& size_list) {
  static const std::regex kName(R"('([a-z_]+)')");
  std::vector<std::string> names;
  for (std::sregex_iterator it(name_list.begin(), name_list.end(), kName), end; it != end; ++it) {
    names.push_back((*it)[1].str());
  }
  std::vector<int> sizes;
  for (const std::string& part : Split(size_list, ',')) {
    if (auto v = ToInt(Trim(part))) sizes.push_back(*v);
  }
  if (names.size() != sizes.size() || sizes.empty()) return;
  int world = 1;
  for (size_t i = 0; i < names.size(); ++i) {
    world *= sizes[i];
    if (names[i] == "tp") {
      run_.tp = sizes[i];
      run_.sp = sizes[i] > 1;  // torchtitan's TP always shards norms (SP)
    } else if (names[i] == "pp") {
      run_.pp = sizes[i];
    } else if (names[i] == "cp") {
      run_.cp = sizes[i];
    } else if (names[i] == "dp_shard") {
      run_.zero = 3;  // FSDP2 full sharding over the shard group
      run_.dp_shard = sizes[i];
    } else if (names[i] == "dp_replicate") {
      run_.dp_replicate = sizes[i];
    } else if (names[i] == "dp") {
      titan_mesh_dp_ = sizes[i];
    }
    if (names[i] == "dp_shard" || names[i] == "dp_replicate" || names[i] == "dp") {
      run_.dp_degree = run_.dp_degree.value_or(1) * sizes[i];
    }
  }
  if (!run_.world_size) run_.world_size = world;
}

void RunReader::ReadDeepSpeed(const Line& l) {
  static const std::regex kDsStep(R"(step=(\d+), skipped=(\d+))");
  static const std::regex kDsRate(
      R"((?:global_step=(\d+),.*?CurrSamplesPerSec=([0-9.eE+-]+))|(?:(\d+)/(\d+), SamplesPerSec=([0-9.eE+-]+)))");
  const std::string& s = l.text;
  std::smatch m;
  if (Contains(s, "skipped=") && std::regex_search(s, m, kDsStep)) {
    const int64_t k = std::stoll(m[2].str());
    if (ds_skipped_ >= 0 && k > ds_skipped_) ds_new_skip_ = true;
    ds_skipped_ = k;
  } else if (Contains(s, "SamplesPerSec=") && std::regex_search(s, m, kDsRate)) {
    if (!FromStepRank(l)) return;
    LogStep st;
    if (m[1].matched) {
      st.iteration = std::stoll(m[1].str());
      st.value = std::stod(m[2].str());
    } else {
      st.iteration = std::stoll(m[4].str());
      st.value = std::stod(m[5].str());
    }
    st.skipped = ds_new_skip_;
    ds_new_skip_ = false;
    Add(st);
  }
}

void RunReader::ReadHf(const Line& l) {
  static const std::regex kHfNumber(
      R"('(train_runtime|train_steps_per_second|train_samples_per_second)': ([0-9.eE+-]+))");
  static const std::regex kHfBatch(
      R"(Total train batch size \(w\. parallel, distributed & accumulation\) = ([0-9,]+))");
  static const std::regex kHfSteps(R"(Total optimization steps = ([0-9,]+))");
  static const std::regex kHfMicro(R"(Instantaneous batch size per device = ([0-9,]+))");
  if (!run_.whole_run_average) return;
  const std::string& s = l.text;
  std::smatch m;
  // The final metrics dict (TrainOutput(...) repeats it: not counted twice).
  if (Contains(s, "'train_runtime'") && !Contains(s, "TrainOutput(") && FromStepRank(l)) {
    std::optional<double> runtime, steps_per_s, samples_per_s;
    for (std::sregex_iterator it(s.begin(), s.end(), kHfNumber), end; it != end; ++it) {
      const std::string key = (*it)[1].str();
      const double v = std::stod((*it)[2].str());
      if (key == "train_runtime") runtime = v;
      if (key == "train_steps_per_second") steps_per_s = v;
      if (key == "train_samples_per_second") samples_per_s = v;
    }
    LogStep st;
    if (steps_per_s && *steps_per_s > 0) {
      st.value = 1.0 / *steps_per_s;
    } else if (runtime && hf_total_steps_ && *hf_total_steps_ > 0) {
      st.value = *runtime / static_cast<double>(*hf_total_steps_);
    } else if (samples_per_s && *samples_per_s > 0) {
      st.value = -*samples_per_s;  // samples/s: resolved in Finish
    }
    if (st.value != 0) run_.steps.push_back(st);
  }
  if (!Contains(s, " = ")) return;  // not a line of the "Running training" block
  if (std::regex_search(s, m, kHfBatch)) {
    run_.global_batch = static_cast<int64_t>(ToNumber(m[1].str()).value_or(0));
  } else if (std::regex_search(s, m, kHfSteps)) {
    hf_total_steps_ = static_cast<int64_t>(ToNumber(m[1].str()).value_or(0));
  } else if (std::regex_search(s, m, kHfMicro)) {
    run_.micro_batch = static_cast<int64_t>(ToNumber(m[1].str()).value_or(0));
  }
}

LoggedRun RunReader::Finish() {
  LoggedRun& run = run_;
  // HF: a dict with only samples/s (Trainer before 4.7 had no steps/s,
  // huggingface/transformers#11818).
  if (run.whole_run_average) {
    const bool any_rate = std::any_of(run.steps.begin(), run.steps.end(),
                                      [](const LogStep& st) { return st.value < 0; });
    const bool any_time = std::any_of(run.steps.begin(), run.steps.end(),
                                      [](const LogStep& st) { return st.value > 0; });
    if (any_rate && !any_time) {
      run.unit = StepUnit::kSamplesPerSec;
      for (LogStep& st : run.steps) st.value = -st.value;
    } else if (any_rate) {
      std::erase_if(run.steps, [](const LogStep& st) { return st.value < 0; });
    }
  }
  const KvReader r{kv_};
  InterpretMegatronArgs(r, &run);
  InterpretMegatronMoeArgs(r, &run);
  InterpretDeepSpeedConfig(r, &run);
  if (run.format == LogFormat::kTorchtitan) FinishTitan();
  if (!run.gpu_device && device_) run.gpu_device = device_;
  run.ranks_seen = static_cast<int>(ranks_.size());
  if (duplicates_ > 0) {
    run.notes.push_back(std::to_string(duplicates_) +
                        " repeated step line(s) (several ranks) counted once");
  }
  return std::move(run_);
}

// torchtitan: the FSDP degrees, the precision and the global batch the
// section's lines imply.
void RunReader::FinishTitan() {
  LoggedRun& run = run_;
  // A mesh dimension "dp" (releases before the shard/replicate split) is
  // FSDP's shard group unless the args dict says data_parallel_type ddp.
  if (titan_mesh_dp_) {
    if (titan_dp_type_.value_or("fsdp") == "ddp") {
      SetIf(&run.dp_replicate, titan_mesh_dp_);
    } else {
      SetIf(&run.dp_shard, titan_mesh_dp_);
    }
  }
  if (run.dp_shard && *run.dp_shard != 1) run.zero = 3;
  if (!run.dp_degree && run.dp_shard && *run.dp_shard > 0) {
    run.dp_degree = *run.dp_shard * run.dp_replicate.value_or(1);
  }
  if (float8_recipe_) {
    run.precision = TitanFloat8Precision(*float8_recipe_);
    run.precision_recipe = "float8 " + *float8_recipe_;
  }
  // torchtitan states the local batch and its mesh; the global batch is the
  // local batch on every data-parallel rank, times the accumulation steps.
  if (!run.global_batch && run.micro_batch && run.dp_degree) {
    run.global_batch = *run.micro_batch * *run.dp_degree * run.grad_accumulation.value_or(1);
    run.notes.push_back("global batch = local batch " + std::to_string(*run.micro_batch) +
                        " x data-parallel degree " + std::to_string(*run.dp_degree) +
                        (run.grad_accumulation
                             ? " x accumulation steps " + std::to_string(*run.grad_accumulation)
                             : std::string()));
  }
}

// The format of the whole log, from the step lines it carries.
Result<std::pair<LogFormat, StepUnit>> DetectFormat(std::string_view text, const std::string& name) {
  const bool megatron = Contains(text, "elapsed time per iteration (ms)");
  // NeMo 2 (Megatron-Core under Lightning) prints "train_step_timing in s: X"
  // (its progress printer; "=X" in the progress bar of NeMo 1).
  const bool nemo = Contains(text, "train_step_timing in s");
  const bool titan = Contains(text, "tps:") && Contains(text, "step:");
  const bool ds_rate = Contains(text, "SamplesPerSec=");
  const bool hf = Contains(text, "train_runtime") || Contains(text, "train_steps_per_second");
  // DeepSpeed ran: its engine's config print ("[config.py:NNN:print]"), its
  // start-up banner ("DeepSpeed info:"), or Megatron-DeepSpeed's --deepspeed
  // argument printed as True.
  static const std::regex kDsArg(R"((?:^|\n)\s*deepspeed \.{2,}\s*True)");
  const std::string whole(text);
  const bool ds_marks = Contains(text, "[config.py:") || Contains(text, "DeepSpeed info:") ||
                        Contains(text, "DeepSpeedZeroOffload") ||
                        Contains(text, "DeepSpeedCPUAdam") || Contains(text, "zero_optimization") ||
                        std::regex_search(whole, kDsArg);
  if (megatron || nemo) {
    return std::pair{ds_marks ? LogFormat::kMegatronDeepSpeed : LogFormat::kMegatron,
                     StepUnit::kSeconds};
  }
  if (titan) return std::pair{LogFormat::kTorchtitan, StepUnit::kTokensPerSecPerGpu};
  if (ds_rate) return std::pair{LogFormat::kDeepSpeed, StepUnit::kSamplesPerSec};
  if (hf) {
    return std::pair{ds_marks ? LogFormat::kDeepSpeed : LogFormat::kHfTrainer, StepUnit::kSeconds};
  }
  return Status::InvalidArgument(
      name +
      ": no step time found: expected Megatron \"elapsed time per iteration (ms)\", "
      "torchtitan \"step: ... tps:\", DeepSpeed \"SamplesPerSec=\" or Hugging Face "
      "\"train_runtime\" lines");
}

}  // namespace

const char* LogFormatName(LogFormat f) { return EnumName(f, kLogFormatNames); }

Result<std::vector<LoggedRun>> ParseTrainingLogRuns(std::string_view text,
                                                   const std::string& name) {
  PT_ASSIGN_OR_RETURN(auto format, DetectFormat(text, name));
  const std::vector<Line> lines = SplitLines(text);
  std::vector<LoggedRun> runs;
  int dropped = 0;  // sections without a step figure (a run stopped before its first step)
  auto finish = [&](RunReader& reader) {
    if (reader.HasSteps()) {
      runs.push_back(reader.Finish());
    } else {
      ++dropped;
    }
  };
  RunReader reader(format.first, format.second, lines.empty() ? 1 : lines[0].number);
  for (const Line& l : lines) {
    if (reader.StartsNewRun(l) || reader.RestartsSteps(l)) {
      finish(reader);
      reader = RunReader(format.first, format.second, l.number);
    }
    reader.Read(l);
  }
  finish(reader);
  if (runs.empty()) {
    return Status::InvalidArgument(name + ": reads as a " + LogFormatName(format.first) +
                                   " log but holds no step figure");
  }
  if (dropped > 0 && runs.size() > 0) {
    runs.front().notes.push_back(std::to_string(dropped) +
                                 " section(s) of the log open a run but hold no step figure");
  }
  return runs;
}

std::string DescribeLoggedRun(const LoggedRun& run, int index) {
  std::string out = "run " + std::to_string(index) + " (line " + std::to_string(run.first_line) +
                    "): " + LogFormatName(run.format);
  out += ", " + (run.precision ? *run.precision : std::string("precision not stated"));
  if (run.precision_recipe) out += " (" + *run.precision_recipe + ")";
  std::string degrees;
  auto add = [&](const char* key, const std::optional<int>& v) {
    if (v) degrees += std::string(degrees.empty() ? "" : " ") + key + "=" + std::to_string(*v);
  };
  add("gpus", run.world_size);
  add("tp", run.tp);
  add("pp", run.pp);
  add("cp", run.cp);
  add("dp_shard", run.dp_shard);
  add("dp_replicate", run.dp_replicate);
  add("zero", run.zero);
  add("ep", run.ep);
  if (!degrees.empty()) out += ", " + degrees;
  const LogStep& first = run.steps.front();
  const LogStep& last = run.steps.back();
  out += ", " + std::to_string(run.steps.size()) + " step figure(s)";
  if (first.iteration > 0 && last.iteration > 0) {
    out += " (steps " + std::to_string(first.iteration) + "-" + std::to_string(last.iteration) + ")";
  }
  return out;
}

Result<LoggedRun> ParseTrainingLog(std::string_view text, const std::string& name,
                                   std::optional<int> run) {
  PT_ASSIGN_OR_RETURN(std::vector<LoggedRun> runs, ParseTrainingLogRuns(text, name));
  const int n = static_cast<int>(runs.size());
  if (run) {
    if (*run < 1 || *run > n) {
      return Status::InvalidArgument(name + ": --run " + std::to_string(*run) +
                                     " is out of range: the log holds " + std::to_string(n) +
                                     " run(s) (1-" + std::to_string(n) + ")");
    }
    return std::move(runs[*run - 1]);
  }
  if (n == 1) return std::move(runs.front());
  std::string msg = name + ": the log holds " + std::to_string(n) +
                    " runs; pass --run N (1-" + std::to_string(n) + ") to choose one:";
  for (int i = 0; i < n; ++i) msg += "\n  " + DescribeLoggedRun(runs[i], i + 1);
  return Status::InvalidArgument(msg);
}


std::optional<std::string> ClusterForDevice(const std::string& device) {
  const auto has = [&](const char* what) { return device.find(what) != std::string::npos; };
  if (has("GH200")) return std::nullopt;  // no GH200 node preset
  if (has("H200")) return "dgx-h200";
  if (has("H100")) return "dgx-h100";
  if (has("A100")) return has("40GB") || has("40 GB") ? "dgx-a100-40gb" : "dgx-a100-80gb";
  return std::nullopt;
}

Result<StepSummary> SummarizeSteps(const LoggedRun& run, const StepSummaryOptions& options) {
  StepSummary sum;
  std::vector<double> v;
  for (const LogStep& s : run.steps) {
    if (s.skipped) {
      ++sum.skipped_dropped;
      continue;
    }
    v.push_back(s.value);
  }
  const int warm = run.whole_run_average ? 0 : options.warmup_steps;
  if (warm > 0 && static_cast<int>(v.size()) > warm) {
    v.erase(v.begin(), v.begin() + warm);
    sum.warmup_dropped = warm;
  }
  if (v.empty()) return Status::InvalidArgument("no step left after dropping skipped intervals");
  auto median = [](std::vector<double> x) {
    std::sort(x.begin(), x.end());
    const size_t n = x.size();
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
  };
  const double med = median(v);
  std::vector<double> dev;
  for (double x : v) dev.push_back(std::fabs(x - med));
  const double mad = 1.4826 * median(dev);
  std::vector<double> kept;
  for (double x : v) {
    if (std::fabs(x - med) >
        std::max(options.outlier_mads * mad, options.outlier_min_fraction * std::fabs(med))) {
      ++sum.outliers_dropped;
    } else {
      kept.push_back(x);
    }
  }
  sum.median = median(kept);
  sum.used = static_cast<int>(kept.size());
  return sum;
}

}  // namespace paratune::planner
