#include "planner/pipeline.h"

#include <algorithm>

#include "common/enum_names.h"

namespace paratune::planner {
namespace {

// By value, in the order of PpSplit's declaration (pipeline.h).
constexpr const char* kPpSplitNames[] = {"megatron", "torchtitan", "balanced"};

std::string Str(int v) { return std::to_string(v); }

// Megatron-Core @ d98e8a6: megatron/training/arguments.py validate_args,
// megatron/core/transformer/transformer_config.py __post_init__ and
// megatron/core/transformer/transformer_block.py get_num_layers_to_build.
std::string MegatronError(int layers, const ParallelConfig& c) {
  const int pp = c.pp, v = c.vpp;
  const int f = c.first_stage_layers, l = c.last_stage_layers;
  const int e = c.pp_embedding_layers, o = c.pp_loss_layers;
  // An embedding or loss counted as more than one layer is said with the
  // layout string (MegatronLayoutString), where the first and last chunks
  // hold that many layers fewer.
  if (f > 0 || l > 0) {
    if (e > 0 || o > 0) {
      return "first_stage_layers / last_stage_layers cannot be combined with counting the "
             "embedding or the loss as a layer (transformer_config.py:2229-2239)";
    }
    if (pp < 2) return "first_stage_layers / last_stage_layers need pp > 1";
    if (v > 1 && (f % v != 0 || l % v != 0)) {
      return "the first and last stages' layers (" + Str(f) + ", " + Str(l) +
             ") must be divisible by vpp " + Str(v) + " (transformer_config.py:2302-2336)";
    }
    const int rest_stages = pp - (f > 0) - (l > 0);
    const int rest = layers - f - l;
    if (rest < 0 || (rest > 0) != (rest_stages > 0)) {
      return Str(rest) + " layers remain for " + Str(rest_stages) +
             " middle stages: both must be zero or both positive (transformer_config.py:2338-2344)";
    }
    if (rest_stages > 0 && rest % rest_stages != 0) {
      return "the middle stages' " + Str(rest) + " layers are not divisible by the " +
             Str(rest_stages) + " middle stages (transformer_config.py:2346-2352)";
    }
    if (rest_stages > 0 && v > 1 && (rest / rest_stages) % v != 0) {
      return "each middle stage's " + Str(rest / rest_stages) +
             " layers are not divisible by vpp " + Str(v) + " (transformer_config.py:2354-2365)";
    }
    return "";
  }
  const int n = layers + e + o;
  if (n % pp != 0) {
    return "layers" + std::string(e + o > 0 ? " + embedding/loss" : "") + " (" + Str(n) +
           ") are not divisible by pp " + Str(pp) +
           " (arguments.py:985-997, transformer_config.py:2371-2385); uneven stages need "
           "first_stage_layers / last_stage_layers or pp_embedding_layers / pp_loss_layers";
  }
  if (v > 1 && (n / pp) % v != 0) {
    return "each stage's " + Str(n / pp) + " layers are not divisible into vpp " + Str(v) +
           " chunks (arguments.py:958-977, transformer_config.py:2403-2415)";
  }
  const int chunk = n / pp / v;
  if ((pp > 1 || v > 1) && (chunk < e || chunk < o)) {
    return "the first or last chunk holds fewer layers than the embedding/loss it counts "
           "(transformer_block.py:190-201)";
  }
  return "";
}

// torchtitan @ b5bcd76: torchtitan/distributed/pipeline_parallel.py
// _get_pipeline_metadata (217-263) and _generate_llm_fqn_per_model_part (357-467).
std::string TorchtitanError(int layers, const ParallelConfig& c) {
  if (c.pp_schedule == PpSchedule::kZbH1 && c.vpp < 2) {
    return "torchtitan's zero-bubble ZB-H1 is InterleavedZeroBubble, a multi-stage schedule: "
           "vpp >= 2 (pipeline_parallel.py:252-263)";
  }
  if (c.first_stage_layers > 0 || c.last_stage_layers > 0) {
    return "torchtitan has no per-stage layer counts (it splits layers itself; "
           "pipeline_parallel_first/last_stage_less_layers are pp_embedding_layers / "
           "pp_loss_layers)";
  }
  if (c.pp == 1) return "";
  const int stages = c.pp * c.vpp;
  const int in = c.pp_embedding_layers, out = c.pp_loss_layers;
  const int eff = layers + in + out;
  if (stages > eff) {
    return "stages (" + Str(stages) + ") exceed the effective layers (" + Str(eff) +
           ") (pipeline_parallel.py:392-395)";
  }
  const int per = eff / stages;
  if (in > per || out > per) {
    return "the embedding/output weights (" + Str(in) + ", " + Str(out) +
           ") exceed the layers per stage (" + Str(per) + ") (pipeline_parallel.py:411-418)";
  }
  if (TorchtitanLayersPerStage(layers, c) < 0) {
    return "no pipeline_parallel_layers_per_stage makes ceil((" + Str(eff) +
           ") / value) = " + Str(stages) + " stages (pipeline_parallel.py:221-259)";
  }
  return "";
}

// DeepSpeed @ edaa722: deepspeed/runtime/pipe/module.py _partition_layers.
std::string BalancedError(int layers, const ParallelConfig& c) {
  if (c.vpp > 1) return "DeepSpeed's pipeline engine has no interleaved (virtual) stages";
  if (c.first_stage_layers > 0 || c.last_stage_layers > 0 || c.pp_embedding_layers > 0 ||
      c.pp_loss_layers > 0) {
    return "DeepSpeed's PipelineModule partitions the layers itself (partition_method); it takes "
           "no per-stage counts or embedding/loss weights (runtime/pipe/module.py:396-421)";
  }
  if (layers < c.pp) return "fewer layers than pipeline stages";
  return "";
}

}  // namespace

const char* PpSplitName(PpSplit s) { return EnumLookup(s, kPpSplitNames, "megatron"); }

namespace {

// Megatron's two unrolling passes, each over the whole string once
// (pipeline_parallel_layer_layout.py parse_str_to_list: re.sub of
// r'\(([^)]+)\)\*(\d+)', then of r'(.)\*(\d+)').
std::string UnrollLayout(const std::string& in) {
  std::string s;
  for (char ch : in) {
    if (ch != ',') s += ch;
  }
  auto digits = [](const std::string& t, size_t i, int* n) {
    size_t j = i;
    long v = 0;
    while (j < t.size() && t[j] >= '0' && t[j] <= '9' && v < 100000) v = v * 10 + (t[j++] - '0');
    *n = static_cast<int>(v);
    return j;
  };
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const size_t close = s[i] == '(' ? s.find(')', i + 1) : std::string::npos;
    int n = 0;
    if (close != std::string::npos && close > i + 1 && close + 1 < s.size() && s[close + 1] == '*') {
      const size_t end = digits(s, close + 2, &n);
      if (end > close + 2) {
        for (int k = 0; k < n; ++k) out.append(s, i + 1, close - i - 1);
        i = end;
        continue;
      }
    }
    out += s[i++];
  }
  std::string res;
  for (size_t i = 0; i < out.size();) {
    int n = 0;
    if (i + 1 < out.size() && out[i + 1] == '*') {
      const size_t end = digits(out, i + 2, &n);
      if (end > i + 2) {
        res.append(static_cast<size_t>(n), out[i]);
        i = end;
        continue;
      }
    }
    res += out[i++];
  }
  return res;
}

std::string Repeat(int n) { return n <= 0 ? "" : n == 1 ? "t" : "t*" + Str(n); }

}  // namespace

Result<MegatronLayout> ParseMegatronLayout(const std::string& s, int layers, int mtp) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("pipeline layout \"" + s + "\": " + why);
  };
  const std::string flat = UnrollLayout(s);
  std::vector<std::string> chunks(1);
  for (char ch : flat) {
    if (ch == '|') {
      chunks.emplace_back();
    } else if (ch == 'E' || ch == 't' || ch == 'm' || ch == 'L') {
      chunks.back() += ch;
    } else {
      return bad(std::string("unknown layer character '") + ch + "' (E, t, m, L, | and * only)");
    }
  }
  const auto count = [&](char ch) { return static_cast<int>(std::count(flat.begin(), flat.end(), ch)); };
  // validate_layer_layout @ d98e8a6 (pipeline_parallel_layer_layout.py:86-130).
  if (flat.empty() || flat.front() != 'E' || count('E') != 1) {
    return bad("the embedding E must come first, once");
  }
  if (flat.back() != 'L' || count('L') != 1) return bad("the loss L must come last, once");
  if (count('t') != layers) {
    return bad(Str(count('t')) + " decoder layers for a model of " + Str(layers));
  }
  if (count('m') != mtp) return bad(Str(count('m')) + " MTP modules for a model with " + Str(mtp));
  const size_t first_m = flat.find('m');
  if (first_m != std::string::npos && flat.find('t', first_m) != std::string::npos) {
    return bad("decoder layers must come before the MTP modules");
  }
  const int n = static_cast<int>(chunks.size());
  if (n < 2) return bad("one chunk: a layout needs pp > 1");
  // The priced form: E + a layers | c layers each | b layers, the MTP, L.
  const auto decoders = [](const std::string& c) {
    return static_cast<int>(std::count(c.begin(), c.end(), 't'));
  };
  const std::string& head = chunks.front();
  const std::string& tail = chunks.back();
  if (head.find_first_not_of('t', 1) != std::string::npos) {
    return bad("the first chunk holds more than the embedding and decoder layers");
  }
  const size_t tail_t = tail.find_last_of('t');
  const size_t tail_rest = tail_t == std::string::npos ? 0 : tail_t + 1;
  if (tail.find_first_not_of('t') != tail_rest || tail.find_first_not_of('m', tail_rest) != tail.size() - 1) {
    return bad("the last chunk holds more than decoder layers, the MTP modules and the loss");
  }
  // The common chunk size: the chunks between, or with none the larger end.
  const int size = n > 2 ? decoders(chunks[1]) : std::max(decoders(head), decoders(tail));
  for (int k = 1; k + 1 < n; ++k) {
    if (chunks[k].find_first_not_of('t') != std::string::npos) {
      return bad("chunk " + Str(k) + " holds more than decoder layers (the MTP belongs to the last)");
    }
    if (decoders(chunks[k]) != size) {
      return bad("the chunks between the first and the last hold different layer counts (" +
                 Str(size) + ", " + Str(decoders(chunks[k])) +
                 "): only the first and last may differ");
    }
  }
  MegatronLayout out;
  out.chunks = n;
  out.embedding = size - decoders(head);
  out.loss = size - decoders(tail);
  if (out.embedding < 0 || out.loss < 0) {
    return bad("the first or last chunk holds more layers than the chunks between");
  }
  return out;
}

std::string MegatronLayoutString(int layers, int mtp, const ParallelConfig& c) {
  const int chunks = c.pp * c.vpp;
  const int size = (layers + c.pp_embedding_layers + c.pp_loss_layers) / chunks;
  std::string s = "E" + Repeat(size - c.pp_embedding_layers) + "|";
  if (chunks > 2) s += "(" + Repeat(size) + "|)*" + Str(chunks - 2);
  s += Repeat(size - c.pp_loss_layers) + std::string(static_cast<size_t>(std::max(0, mtp)), 'm') + "L";
  return s;
}

Result<PpSplit> ParsePpSplit(const std::string& s) {
  return ParseEnumName<PpSplit>(s, kPpSplitNames, "a pipeline split");
}

std::string PipelineLayoutError(int layers, const ParallelConfig& c, PpSplit split) {
  if (c.pp < 1 || c.vpp < 1) return "pp and vpp must be >= 1";
  if (c.pp_schedule != PpSchedule::k1F1B) {
    if (c.pp < 2) return std::string(PpScheduleName(c.pp_schedule)) + " needs pp > 1";
    if (VShaped(c.pp_schedule) && c.vpp != 2) {
      return std::string(PpScheduleName(c.pp_schedule)) +
             " runs two stages per rank in a V (vpp = 2)";
    }
    if (split != PpSplit::kTorchtitan) {
      // Megatron-Core @ d98e8a6 get_forward_backward_func (schedules.py:154-168)
      // picks no pipelining, 1F1B or interleaved 1F1B; DeepSpeed's PipelineEngine
      // runs TrainSchedule (1F1B).
      return std::string(PpScheduleName(c.pp_schedule)) +
             " is not a schedule of this framework (its schedules: 1F1B and interleaved)";
    }
  }
  if (c.vpp > 1 && c.pp < 2) return "interleaving (vpp > 1) needs pp > 1";
  if (c.first_stage_layers < 0 || c.last_stage_layers < 0 || c.pp_embedding_layers < 0 ||
      c.pp_loss_layers < 0) {
    return "pipeline layout counts must be >= 0";
  }
  if (c.pp == 1 && (c.first_stage_layers > 0 || c.last_stage_layers > 0 ||
                    c.pp_embedding_layers > 0 || c.pp_loss_layers > 0)) {
    return "first_stage_layers, last_stage_layers, pp_embedding_layers and pp_loss_layers need pp "
           "> 1";
  }
  switch (split) {
    case PpSplit::kMegatron:
      return MegatronError(layers, c);
    case PpSplit::kTorchtitan:
      return TorchtitanError(layers, c);
    case PpSplit::kBalanced:
      return BalancedError(layers, c);
  }
  return "";
}

int TorchtitanLayersPerStage(int layers, const ParallelConfig& c) {
  const int stages = c.pp * c.vpp;
  if (c.vpp <= 2) return 0;  // 1F1B: one stage per rank; looped schedules: two
  const int eff = layers + c.pp_embedding_layers + c.pp_loss_layers;
  // ceil(eff / lps) decreases with lps: the first lps reaching `stages` or fewer decides.
  for (int lps = 1; lps <= eff; ++lps) {
    const int s = (eff + lps - 1) / lps;
    if (s == stages) return lps;
    if (s < stages) break;
  }
  return -1;
}

double PipelineBubble(PpSchedule s, int pp, int vpp, double f, double b, double w) {
  if (pp <= 1) return 0.0;
  const double fill = pp - 1.0;
  const double v = std::max(1, vpp);
  switch (s) {
    case PpSchedule::k1F1B:
      return fill * (f + b + w) / v;
    case PpSchedule::kZbH1:
      return fill * std::max(0.0, f + b - w) / v;
    case PpSchedule::kZbV:
      return fill * std::max(0.0, f / 2 + b / 2 - 2 * w / 2);
    case PpSchedule::kDualPipeV: {
      const double fs = f / 2, bs = b / 2, ws = w / 2;
      const double fb = fs + (bs + ws);  // F&B: a forward and a full backward chunk
      return fill * std::max(0.0, fb + (bs + ws) - 3 * ws);
    }
  }
  return fill * (f + b + w) / v;
}

double BubbleRelativeTo1F1B(PpSchedule s, int pp, int vpp, double f, double b, double w) {
  const double base = PipelineBubble(PpSchedule::k1F1B, pp, 1, f, b, w);
  return base > 0 ? PipelineBubble(s, pp, vpp, f, b, w) / base : 0.0;
}

int ChunkLayers(int layers, const ParallelConfig& c, PpSplit split, int k) {
  const int pp = c.pp, v = c.vpp, stages = pp * v;
  switch (split) {
    case PpSplit::kMegatron: {
      const int f = c.first_stage_layers, l = c.last_stage_layers;
      if (f > 0 || l > 0) {
        const int rest_stages = pp - (f > 0) - (l > 0);
        const int mid = rest_stages > 0 ? (layers - f - l) / rest_stages : 0;
        int per_rank = mid;
        const int rank = ChunkRank(c, k);
        if (rank == 0 && f > 0) per_rank = f;
        if (rank == pp - 1 && l > 0) per_rank = l;
        return per_rank / v;
      }
      const int e = c.pp_embedding_layers, o = c.pp_loss_layers;
      int n = (layers + e + o) / pp / v;
      if (k == 0) n -= e;
      if (k == stages - 1) n -= o;
      return n;
    }
    case PpSplit::kTorchtitan: {
      if (stages == 1) return layers;
      const int in = c.pp_embedding_layers, out = c.pp_loss_layers;
      const int eff = layers + in + out;
      int n = eff / stages + (k < eff % stages ? 1 : 0);
      if (k == 0) n -= in;
      if (k == stages - 1) n -= out;
      return n;
    }
    case PpSplit::kBalanced:
      return layers / pp + (ChunkRank(c, k) < layers % pp ? 1 : 0);
  }
  return 0;
}

namespace {

StageLayers ComputeSplit(int layers, const ParallelConfig& c, PpSplit split);

// What the split reads: the layer count, the rule and the pipeline fields.
struct SplitKey {
  int layers, pp, vpp, first, last, embedding, loss;
  PpSplit split;
  PpSchedule schedule;
  bool operator==(const SplitKey&) const = default;
};

}  // namespace

StageLayers SplitLayers(int layers, const ParallelConfig& c, PpSplit split) {
  // The search prices many configurations of one layout in a row and each
  // asks for its split several times (memory, parameters, MoE layers per
  // stage): one entry per thread answers those repeats.
  thread_local SplitKey last_key{-1, 0, 0, 0, 0, 0, 0, PpSplit::kMegatron, PpSchedule::k1F1B};
  thread_local StageLayers last_split;
  const SplitKey key{layers, c.pp, c.vpp, c.first_stage_layers, c.last_stage_layers,
                     c.pp_embedding_layers, c.pp_loss_layers, split, c.pp_schedule};
  if (!(key == last_key)) {
    last_split = ComputeSplit(layers, c, split);
    last_key = key;
  }
  return last_split;
}

namespace {

StageLayers ComputeSplit(int layers, const ParallelConfig& c, PpSplit split) {
  StageLayers s;
  const int pp = std::max(1, c.pp), v = std::max(1, c.vpp);
  if (pp == 1) {
    s.first = s.last = s.max = layers;
    return s;
  }
  int lo = layers, hi = 0;
  // Counts rank r's `n` layers into s (first, last, the most loaded middle) and lo/hi.
  auto add_rank = [&](int r, int n) {
    if (r == 0) s.first = n;
    if (r == pp - 1) s.last = n;
    if (r > 0 && r < pp - 1) s.middle = std::max(s.middle, n);
    lo = std::min(lo, n);
    hi = std::max(hi, n);
  };
  const bool vshape = VShaped(c.pp_schedule) && v == 2;
  if (split == PpSplit::kMegatron && c.vpp >= 1 && (vshape || !VShaped(c.pp_schedule))) {
    // Megatron's split in closed form (the search asks for it per
    // configuration): every chunk of rank r has ChunkRank r, so rank r holds
    // v chunks of per_rank(r) / v layers with a first/last split; without one,
    // v chunks of (layers + e + o) / pp / v, less e on the rank of chunk 0 and
    // o on the rank of the last chunk (rank 0 under a V schedule).
    const int f = c.first_stage_layers, l = c.last_stage_layers;
    int n_first, n_mid, n_last;
    if (f > 0 || l > 0) {
      const int rest_stages = pp - (f > 0) - (l > 0);
      const int mid = rest_stages > 0 ? (layers - f - l) / rest_stages : 0;
      n_first = v * ((f > 0 ? f : mid) / v);
      n_mid = v * (mid / v);
      n_last = v * ((l > 0 ? l : mid) / v);
    } else {
      const int e = c.pp_embedding_layers, o = c.pp_loss_layers;
      const int base = v * ((layers + e + o) / pp / v);
      n_first = base - e - (vshape ? o : 0);
      n_mid = base;
      n_last = base - (vshape ? 0 : o);
    }
    s.first = n_first;
    s.last = n_last;
    lo = std::min({lo, n_first, n_last});
    hi = std::max({hi, n_first, n_last});
    if (pp > 2) {
      s.middle = std::max(0, n_mid);
      lo = std::min(lo, n_mid);
      hi = std::max(hi, n_mid);
    }
    s.max = hi;
    s.even = lo == hi;
    return s;
  }
  if (split != PpSplit::kMegatron && c.vpp >= 1 && (vshape || !VShaped(c.pp_schedule))) {
    // Torchtitan's and the balanced split rank by rank, each rank's chunks
    // (all of ChunkRank r) counted at once instead of one ChunkLayers each.
    const int stages = pp * v;
    const int in = c.pp_embedding_layers, out = c.pp_loss_layers;
    const int eff = layers + in + out;
    const int owner_last = vshape ? 0 : pp - 1;  // the rank of chunk stages − 1
    for (int r = 0; r < pp; ++r) {
      int n;
      if (split == PpSplit::kBalanced) {
        n = v * (layers / pp + (r < layers % pp ? 1 : 0));
      } else {
        const int rem = eff % stages;
        // Chunks of rank r below rem take one layer more.
        const int extra = vshape ? (r < rem ? 1 : 0) + (2 * pp - 1 - r < rem ? 1 : 0)
                                 : (r < rem ? std::min(v, (rem - r - 1) / pp + 1) : 0);
        n = v * (eff / stages) + extra - (r == 0 ? in : 0) - (r == owner_last ? out : 0);
      }
      add_rank(r, n);
    }
    s.max = hi;
    s.even = lo == hi;
    return s;
  }
  for (int r = 0; r < pp; ++r) {
    int n = 0;
    if (vshape) {  // rank r runs stages r and 2pp−1−r (ChunkRank)
      n = ChunkLayers(layers, c, split, r) + ChunkLayers(layers, c, split, 2 * pp - 1 - r);
    } else {
      for (int j = 0; j < v; ++j) n += ChunkLayers(layers, c, split, r + j * pp);
    }
    add_rank(r, n);
  }
  s.max = hi;
  s.even = lo == hi;
  return s;
}


// Megatron's first/last split for layers % pp != 0: the stages in between take
// ceil(layers / pp) each and the first and last share the rest (as Megatron's
// Llama 3.1 405B recipe does: 126 layers on 16 stages = 7 + 14 × 8 + 7).
bool BalancedFirstLast(int layers, int pp, int* first, int* last) {
  if (pp < 3) {
    if (pp != 2 || layers < 2) return false;
    *first = layers / 2;
    *last = layers - *first;
    return true;
  }
  for (int mid = (layers + pp - 1) / pp; mid <= layers; ++mid) {
    const int rest = layers - mid * (pp - 2);
    if (rest < 2) return false;
    if (rest <= 2 * mid) {
      *first = rest / 2;
      *last = rest - *first;
      return true;
    }
  }
  return false;
}

// With one of first/last pinned, the other that makes the middle stages even
// with the smallest most-loaded stage (ties: closest to the pinned one).
bool Complement(int layers, int pp, int pinned, int* other) {
  int best = -1, best_max = 0;
  for (int x = 1; x < layers - pinned; ++x) {
    const int rest = layers - pinned - x;
    if (pp > 2 ? rest % (pp - 2) != 0 || rest == 0 : rest != 0) continue;
    const int mx = std::max({pinned, x, pp > 2 ? rest / (pp - 2) : 0});
    if (best < 0 || mx < best_max ||
        (mx == best_max && std::abs(x - pinned) < std::abs(best - pinned))) {
      best = x;
      best_max = mx;
    }
  }
  if (best < 0) return false;
  *other = best;
  return true;
}

}  // namespace

std::vector<LayoutChoice> LayoutChoices(int layers, int pp, PpSplit split, bool interleave,
                                        int max_vpp, int pinned_first, int pinned_last) {
  std::vector<LayoutChoice> raw;
  if (pp == 1) {
    raw.push_back({});
  } else {
    switch (split) {
      case PpSplit::kMegatron: {
        if (layers % pp == 0) raw.push_back({});
        raw.push_back({0, 0, 1, 1, {}});
        raw.push_back({0, 0, 1, 0, {}});
        raw.push_back({0, 0, 0, 1, {}});
        // Megatron-Bridge's layouts for the 61-layer DeepSeek-V3 and Kimi K2
        // give the last chunk the remainder of an equal split, the MTP module
        // and the loss counted as those layers ("Et*4|(t*4|)*14tmL": loss 3 at
        // pp·vpp 16; recipes/deepseek/deepseek_v3.py:68-76 @v0.5.0): one
        // layout per remainder of 2 or more that leaves the last chunk a layer.
        for (int v = 1; v <= (interleave ? std::max(1, max_vpp) : 1); ++v) {
          const int chunks = pp * v, per = (layers + chunks - 1) / chunks;
          const int r = per * chunks - layers;
          if (r >= 2 && per - r >= 1) raw.push_back({0, 0, 0, r, {}});
        }
        int f = 0, l = 0;
        if (layers % pp != 0 && BalancedFirstLast(layers, pp, &f, &l))
          raw.push_back({f, l, 0, 0, {}});
        if (pinned_first > 0 || pinned_last > 0) {
          f = pinned_first;
          l = pinned_last;
          bool ok = true;
          if (f > 0 && l == 0) ok = Complement(layers, pp, f, &l);
          if (l > 0 && f == 0) ok = Complement(layers, pp, l, &f);
          if (ok) raw.push_back({f, l, 0, 0, {}});
        }
        break;
      }
      case PpSplit::kTorchtitan:
        raw.push_back({0, 0, 1, 1, {}});  // torchtitan's defaults
        raw.push_back({});
        raw.push_back({0, 0, 1, 0, {}});
        raw.push_back({0, 0, 0, 1, {}});
        break;
      case PpSplit::kBalanced:
        raw.push_back({});
        break;
    }
  }
  std::vector<LayoutChoice> out;
  for (LayoutChoice& ch : raw) {
    if (std::find(out.begin(), out.end(), ch) != out.end()) continue;
    ParallelConfig c;
    c.pp = pp;
    ch.ApplyTo(&c);
    const int top = interleave && pp > 1 ? std::max(1, max_vpp) : 1;
    for (int v = 1; v <= top; ++v) {
      c.vpp = v;
      if (PipelineLayoutError(layers, c, split).empty()) ch.vpps.push_back(v);
    }
    if (!ch.vpps.empty()) out.push_back(ch);
  }
  return out;
}

}  // namespace paratune::planner
