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
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view raw = text.substr(start, end - start);
    if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
    if (!raw.empty()) out.push_back(SplitRank(StripAnsi(raw)));
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
  SetIf(&run->zero, r.Int("zero_stage"));  // Megatron-DeepSpeed
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

bool Contains(std::string_view text, std::string_view what) {
  return text.find(what) != std::string_view::npos;
}

// Adds a step, one per step number (several ranks log the same step); false
// when the step number was already added.
bool AddStep(LoggedRun* run, std::set<int64_t>* seen, LogStep s) {
  if (s.iteration > 0) {
    if (!seen->insert(s.iteration).second) return false;
  }
  run->steps.push_back(s);
  return true;
}

}  // namespace

const char* LogFormatName(LogFormat f) { return EnumName(f, kLogFormatNames); }

Result<LoggedRun> ParseTrainingLog(std::string_view text, const std::string& name) {
  LoggedRun run;
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
    run.format = ds_marks ? LogFormat::kMegatronDeepSpeed : LogFormat::kMegatron;
    run.unit = StepUnit::kSeconds;
  } else if (titan) {
    run.format = LogFormat::kTorchtitan;
    run.unit = StepUnit::kTokensPerSecPerGpu;
  } else if (ds_rate) {
    run.format = LogFormat::kDeepSpeed;
    run.unit = StepUnit::kSamplesPerSec;
  } else if (hf) {
    run.format = ds_marks ? LogFormat::kDeepSpeed : LogFormat::kHfTrainer;
    run.unit = StepUnit::kSeconds;
    run.whole_run_average = true;
  } else {
    return Status::InvalidArgument(
        name +
        ": no step time found: expected Megatron \"elapsed time per iteration (ms)\", "
        "torchtitan \"step: ... tps:\", DeepSpeed \"SamplesPerSec=\" or Hugging Face "
        "\"train_runtime\" lines");
  }

  const std::vector<Line> lines = SplitLines(text);
  std::map<std::string, std::string> kv;
  std::set<int> ranks;
  int step_rank = -2;  // the rank whose step lines are read (-2 = none yet)
  std::set<int64_t> seen;
  int duplicates = 0;
  int64_t ds_skipped = -1;  // DeepSpeed's running skipped count
  bool ds_new_skip = false;
  std::optional<int64_t> hf_total_steps;

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
  static const std::regex kDsStep(R"(step=(\d+), skipped=(\d+))");
  static const std::regex kDsRate(
      R"((?:global_step=(\d+),.*?CurrSamplesPerSec=([0-9.eE+-]+))|(?:(\d+)/(\d+), SamplesPerSec=([0-9.eE+-]+)))");
  static const std::regex kHfNumber(
      R"('(train_runtime|train_steps_per_second|train_samples_per_second)': ([0-9.eE+-]+))");
  static const std::regex kHfBatch(
      R"(Total train batch size \(w\. parallel, distributed & accumulation\) = ([0-9,]+))");
  static const std::regex kHfSteps(R"(Total optimization steps = ([0-9,]+))");
  static const std::regex kHfMicro(R"(Instantaneous batch size per device = ([0-9,]+))");

  // Step lines are read from one rank: the first that logs one.
  auto from_step_rank = [&](const Line& l) {
    if (step_rank == -2) step_rank = l.rank;
    return l.rank == step_rank;
  };

  for (const Line& l : lines) {
    const std::string& s = l.text;
    if (l.rank >= 0) ranks.insert(l.rank);
    std::smatch m;
    if (Contains(s, " ..")) ReadKeyValue(s, &kv);
    switch (run.format) {
      case LogFormat::kMegatron:
      case LogFormat::kMegatronDeepSpeed: {
        if (Contains(s, "train_step_timing in s") && std::regex_search(s, m, kNemoStep)) {
          if (!from_step_rank(l)) break;
          LogStep st;
          st.value = std::stod(m[1].str());
          std::smatch k;
          if (std::regex_search(s, k, kNemoGlobalStep)) {
            st.iteration = static_cast<int64_t>(std::stod(k[1].str()));
          }
          if (std::regex_search(s, k, kNemoBatch) && !run.global_batch) {
            run.global_batch = std::stoll(k[1].str());
          }
          duplicates += !AddStep(&run, &seen, st);
        } else if (Contains(s, "elapsed time per iteration") && std::regex_search(s, m, kMegIter)) {
          if (!from_step_rank(l)) break;
          LogStep st;
          st.iteration = std::stoll(m[1].str());
          st.value = std::stod(m[2].str()) / 1000.0;
          std::smatch k;
          if (std::regex_search(s, k, kMegSkipped)) st.skipped = std::stoi(k[1].str()) > 0;
          if (std::regex_search(s, k, kMegBatch) && !run.global_batch) {
            run.global_batch = std::stoll(k[1].str());
          }
          duplicates += !AddStep(&run, &seen, st);
        } else if (Contains(s, "using world size") && std::regex_search(s, m, kWorld)) {
          run.world_size = std::stoi(m[1].str());
          std::smatch k;
          if (std::regex_search(s, k, kTpSize)) run.tp = std::stoi(k[1].str());
          if (std::regex_search(s, k, kPpSize)) run.pp = std::stoi(k[1].str());
          if (std::regex_search(s, k, kCpSize)) run.cp = std::stoi(k[1].str());
        } else if (Contains(s, "padded vocab") && std::regex_search(s, m, kPaddedVocab)) {
          run.vocab = std::stoi(m[1].str());
        }
        break;
      }
      case LogFormat::kTorchtitan: {
        if (Contains(s, "tps:") && std::regex_search(s, m, kTitanStep)) {
          if (!from_step_rank(l)) break;
          LogStep st;
          st.iteration = std::stoll(m[1].str());
          st.value = ToNumber(m[2].str()).value_or(0);
          duplicates += !AddStep(&run, &seen, st);
        } else if (Contains(s, "local batch size") && std::regex_search(s, m, kTitanLocal)) {
          run.micro_batch = std::stoll(m[1].str());
          if (std::regex_search(s, m, kTitanGlobal)) run.global_batch = std::stoll(m[1].str());
          if (std::regex_search(s, m, kTitanSeq)) run.seq_len = std::stoi(m[1].str());
          if (std::regex_search(s, m, kTitanAccum)) run.grad_accumulation = std::stoi(m[1].str());
        } else if (Contains(s, "Trainer is initialized") && std::regex_search(s, m, kTitanTokens)) {
          const int64_t per_dp = std::stoll(m[1].str()), per_step = std::stoll(m[2].str());
          const int64_t seq = std::stoll(m[4].str());
          if (seq > 0 && per_step % seq == 0) {
            run.seq_len = static_cast<int>(seq);
            run.global_batch = per_step / seq;
            // Tokens per DP rank cover all pipeline micro-batches of one
            // accumulation step: the micro-batch is known without a pipeline.
            if (run.pp.value_or(1) == 1 && per_dp % seq == 0) run.micro_batch = per_dp / seq;
          }
        } else if (Contains(s, "with parallelism:") && std::regex_search(s, m, kTitanParallelism)) {
          const int pp = std::stoi(m[1].str()), dp_replicate = std::stoi(m[2].str());
          const int dp_shard = std::stoi(m[3].str()), cp = std::stoi(m[4].str());
          const int tp = std::stoi(m[5].str()), ep = std::stoi(m[6].str());
          run.pp = pp;
          run.cp = cp;
          run.tp = tp;
          run.sp = tp > 1;                 // torchtitan's TP always shards norms (SP)
          if (dp_shard > 1) run.zero = 3;  // FSDP2 over the shard group
          if (dp_shard > 0) run.dp_degree = dp_replicate * dp_shard;
          if (ep > 1) {
            // The experts' mesh is (pp, dp_replicate, efsdp, ep) with efsdp =
            // dp_shard·cp·tp / ep (parallel_dims.py:282,328): EP borrows from the
            // data, context and tensor ranks and the experts are not TP-split.
            run.ep = ep;
            run.etp = 1;
          }
          if (!run.world_size && dp_shard > 0) {
            run.world_size = pp * dp_replicate * dp_shard * cp * tp;
          }
        } else if (Contains(s, "device mesh") && std::regex_search(s, m, kTitanMesh)) {
          // Mesh dimension names and sizes, outermost first.
          static const std::regex kName(R"('([a-z_]+)')");
          std::vector<std::string> names;
          std::string ns = m[1].str();
          for (std::sregex_iterator it(ns.begin(), ns.end(), kName), end; it != end; ++it) {
            names.push_back((*it)[1].str());
          }
          std::vector<int> sizes;
          for (const std::string& part : Split(m[2].str(), ',')) {
            if (auto v = ToInt(Trim(part))) sizes.push_back(*v);
          }
          if (names.size() == sizes.size() && !sizes.empty()) {
            int world = 1;
            for (size_t i = 0; i < names.size(); ++i) {
              world *= sizes[i];
              if (names[i] == "tp") {
                run.tp = sizes[i];
                run.sp = sizes[i] > 1;  // torchtitan's TP always shards norms (SP)
              } else if (names[i] == "pp") {
                run.pp = sizes[i];
              } else if (names[i] == "cp") {
                run.cp = sizes[i];
              } else if (names[i] == "dp_shard") {
                run.zero = 3;  // FSDP2 full sharding over the shard group
              }
              if (names[i] == "dp_shard" || names[i] == "dp_replicate" || names[i] == "dp") {
                run.dp_degree = run.dp_degree.value_or(1) * sizes[i];
              }
            }
            if (!run.world_size) run.world_size = world;
          }
        } else if (Contains(s, "GPU capacity") && std::regex_search(s, m, kTitanGpu)) {
          run.gpu_device = m[1].str();
        }
        break;
      }
      case LogFormat::kDeepSpeed: {
        if (Contains(s, "skipped=") && std::regex_search(s, m, kDsStep)) {
          const int64_t k = std::stoll(m[2].str());
          if (ds_skipped >= 0 && k > ds_skipped) ds_new_skip = true;
          ds_skipped = k;
        } else if (Contains(s, "SamplesPerSec=") && std::regex_search(s, m, kDsRate)) {
          if (!from_step_rank(l)) break;
          LogStep st;
          if (m[1].matched) {
            st.iteration = std::stoll(m[1].str());
            st.value = std::stod(m[2].str());
          } else {
            st.iteration = std::stoll(m[4].str());
            st.value = std::stod(m[5].str());
          }
          st.skipped = ds_new_skip;
          ds_new_skip = false;
          duplicates += !AddStep(&run, &seen, st);
        }
        [[fallthrough]];
      }
      case LogFormat::kHfTrainer: {
        if (!run.whole_run_average) break;
        // The final metrics dict (TrainOutput(...) repeats it: not counted twice).
        if (Contains(s, "'train_runtime'") && !Contains(s, "TrainOutput(") && from_step_rank(l)) {
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
          } else if (runtime && hf_total_steps && *hf_total_steps > 0) {
            st.value = *runtime / static_cast<double>(*hf_total_steps);
          } else if (samples_per_s && *samples_per_s > 0) {
            st.value = -*samples_per_s;  // samples/s: resolved after the loop
          }
          if (st.value != 0) run.steps.push_back(st);
        }
        if (!Contains(s, " = ")) {
          // Not a line of the "Running training" block.
        } else if (std::regex_search(s, m, kHfBatch)) {
          run.global_batch = static_cast<int64_t>(ToNumber(m[1].str()).value_or(0));
        } else if (std::regex_search(s, m, kHfSteps)) {
          hf_total_steps = static_cast<int64_t>(ToNumber(m[1].str()).value_or(0));
        } else if (std::regex_search(s, m, kHfMicro)) {
          run.micro_batch = static_cast<int64_t>(ToNumber(m[1].str()).value_or(0));
        }
        break;
      }
    }
  }
  // HF: a dict with only samples/s (Trainer before 4.7 had no steps/s).
  if (run.whole_run_average) {
    const bool any_rate = std::any_of(run.steps.begin(), run.steps.end(),
                                      [](const LogStep& st) { return st.value < 0; });
    const bool any_time = std::any_of(run.steps.begin(), run.steps.end(),
                                      [](const LogStep& st) { return st.value > 0; });
    if (any_rate && !any_time) {
      // Trainer before 4.7 reported samples/s only (huggingface/transformers#11818).
      run.unit = StepUnit::kSamplesPerSec;
      for (LogStep& st : run.steps) st.value = -st.value;
    } else if (any_rate) {
      std::erase_if(run.steps, [](const LogStep& st) { return st.value < 0; });
    }
  }
  const KvReader r{kv};
  InterpretMegatronArgs(r, &run);
  InterpretMegatronMoeArgs(r, &run);
  InterpretDeepSpeedConfig(r, &run);
  // torchtitan states the local batch and its mesh; the global batch is the
  // local batch on every data-parallel rank, times the accumulation steps.
  if (run.format == LogFormat::kTorchtitan && !run.global_batch && run.micro_batch &&
      run.dp_degree) {
    run.global_batch = *run.micro_batch * *run.dp_degree * run.grad_accumulation.value_or(1);
    run.notes.push_back("global batch = local batch " + std::to_string(*run.micro_batch) +
                        " x data-parallel degree " + std::to_string(*run.dp_degree) +
                        (run.grad_accumulation
                             ? " x accumulation steps " + std::to_string(*run.grad_accumulation)
                             : std::string()));
  }
  // The GPU, where some line names the device (torch.cuda.get_device_name,
  // nvidia-smi, torchtitan's "GPU capacity" line).
  if (!run.gpu_device) {
    static const std::regex kDevice(R"(NVIDIA (?:GH200|H200|H100|A100)[-A-Za-z0-9 ]*)");
    std::smatch m;
    if (std::regex_search(whole, m, kDevice)) run.gpu_device = Trim(m[0].str());
  }
  run.ranks_seen = static_cast<int>(ranks.size());
  if (duplicates > 0) {
    run.notes.push_back(std::to_string(duplicates) +
                        " repeated step line(s) (several ranks) counted once");
  }
  if (run.steps.empty()) {
    return Status::InvalidArgument(name + ": reads as a " + LogFormatName(run.format) +
                                   " log but holds no step figure");
  }
  return run;
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
