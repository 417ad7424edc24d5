// Shared pieces of the emitters: refusals, rank orders, the header every text
// format carries and the pipeline split check.
#include <algorithm>
#include <sstream>

#include "common/strings.h"
#include "frameworks/emit_internal.h"

namespace paratune::planner::emit_internal {

int64_t Plan::Nodes() const {
  const int gpn = std::max(1, job.cluster.gpus_per_node);
  return std::max<int64_t>(1, (job.gpus + gpn - 1) / gpn);
}

int64_t Plan::GpusPerNode() const {
  return std::min<int64_t>(std::max(1, job.cluster.gpus_per_node), job.gpus);
}

std::string ShardingGridWords(const Plan& p) {
  if ((p.framework == Framework::kFsdp || p.framework == Framework::kTorchtitan) && p.c.gx == 1) {
    return "FSDP's shard degree (dp_shard = gz = " + Str(p.c.gz) +
           ") has no flag here (use --format torchtitan)";
  }
  return "AxoNN's 3D tensor grid (gx = " + Str(p.c.gx) + ", gz = " + Str(p.c.gz) +
         ") has no flag here (use --format axonn)";
}

Status Refuse(EmitFormat f, const std::string& why) {
  return Status::InvalidArgument(std::string("--format ") + EmitFormatName(f) +
                                 " cannot express this plan: " + why);
}

std::string Str(int64_t v) { return std::to_string(v); }

std::string Num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

MoeLaunch MoeLaunchOf(const Plan& p) {
  MoeLaunch l;
  l.ep = p.c.ep;
  l.etp = p.c.etp;
  l.dispatcher = MoeDispatcherName(p.c.moe_dispatcher);
  l.a2a_overlap = p.c.moe_a2a_overlap;
  l.world = static_cast<int>(p.job.gpus);
  l.tp = p.c.gy;
  l.pp = p.c.pp;
  l.vpp = p.c.vpp;
  l.cp = p.c.cp;
  l.full_recompute = p.c.recompute == Recompute::kFull;
  l.precision = p.job.training.precision;
  return l;
}

Status RefuseMoe(EmitFormat f, const Status& why) { return Refuse(f, why.message()); }

namespace {
std::vector<Dim> ActiveOrder(const ParallelConfig& c) {
  std::vector<Dim> out;
  for (Dim d : c.placement.order) {
    if (c.Degree(d) > 1) out.push_back(d);
  }
  return out;
}

std::string Join(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : " ") + std::to_string(x);
  return s;
}
}  // namespace

bool OrderMatches(const ParallelConfig& c, std::initializer_list<Dim> framework_order) {
  std::vector<Dim> want;
  for (Dim d : framework_order) {
    if (c.Degree(d) > 1) want.push_back(d);
  }
  return ActiveOrder(c) == want;
}

std::string OrderString(const ParallelConfig& c) {
  std::string s;
  for (Dim d : ActiveOrder(c)) s += (s.empty() ? "" : "-") + std::string(DimName(d));
  return s.empty() ? "(no parallel dimension)" : s;
}

std::vector<int> ChunkLayerList(const Plan& p) {
  std::vector<int> out;
  const int n = p.c.pp * p.c.vpp;
  for (int k = 0; k < n; ++k)
    out.push_back(ChunkLayers(p.job.model.layers, p.c, p.PricedSplit(), k));
  return out;
}

std::vector<int> RankLayers(const Plan& p) {
  std::vector<int> out(p.c.pp, 0);
  const std::vector<int> chunks = ChunkLayerList(p);
  // Chunk k runs on rank k % pp, or in a V for ZB-V / DualPipeV (ChunkRank).
  for (size_t k = 0; k < chunks.size(); ++k) out[ChunkRank(p.c, static_cast<int>(k))] += chunks[k];
  return out;
}

Status CheckSameSplit(const Plan& p, EmitFormat f, PpSplit split) {
  const int layers = p.job.model.layers;
  const std::string err = PipelineLayoutError(layers, p.c, split);
  if (!err.empty()) return Refuse(f, err);
  if (split == p.PricedSplit()) return Status::Ok();
  const std::string priced_err = PipelineLayoutError(layers, p.c, p.PricedSplit());
  if (!priced_err.empty()) {
    return Refuse(f, std::string("the plan's layout is not one ") + FrameworkName(p.framework) +
                         " builds, so it was not priced: " + priced_err);
  }
  std::vector<int> theirs;
  for (int k = 0; k < p.c.pp * p.c.vpp; ++k) theirs.push_back(ChunkLayers(layers, p.c, split, k));
  const std::vector<int> priced = ChunkLayerList(p);
  if (theirs != priced) {
    return Refuse(f, std::string("it would split the layers per model chunk as ") + Join(theirs) +
                         ", not as the plan was priced (" + Join(priced) + ", " +
                         PpSplitName(p.PricedSplit()) + "'s split)");
  }
  return Status::Ok();
}

Status CheckPresetRules(const Plan& p, EmitFormat f, Framework fw) {
  std::string why;
  if (const FrameworkRuleRef* r =
          BrokenRule(FrameworkPreset(fw), RuleJobOf(p.job.model, p.job.training), p.c, &why)) {
    return Refuse(f, why + " (" + r->source + ")");
  }
  return Status::Ok();
}

std::string CheckpointNote(const Plan& p) {
  if (p.checkpoint_interval_steps <= 0) return "";
  return "checkpoints: every " + Str(p.checkpoint_interval_steps) + " steps (the plan's optimal " +
         "interval), " + (p.checkpoint_async ? "asynchronous" : "synchronous") +
         " as priced, to $CHECKPOINT_DIR (default ./checkpoints)";
}

std::string Header(const Plan& p, const FrameworkEmitter& fe, const char* comment,
                   const char* what) {
  std::ostringstream os;
  os << comment << " " << what << " from paratune plan rank " << p.rank << ": " << p.config_string
     << "\n";
  os << comment << " " << p.job.model.name << ", " << p.job.gpus << " GPUs of "
     << p.job.cluster.name << ", seq " << p.job.training.seq_len << ", global batch " << p.Gbs()
     << "\n";
  if (p.iteration_time_s >= 0) {
    // As the CLI table shows a row: the band (±%), MFU with `!` above the
    // GPU's published ceiling, and the memory reserved per GPU.
    os << comment << " predicted: " << FormatFixed(p.iteration_time_s, 3) << " s/iteration";
    if (p.iteration_time_lo >= 0 && p.iteration_time_s > 0) {
      os << " ±" << FormatFixed(100 * (p.iteration_time_hi / p.iteration_time_s - 1), 0) << " % ("
         << FormatFixed(p.iteration_time_lo, 3) << "-" << FormatFixed(p.iteration_time_hi, 3) << ")";
    }
    if (p.mfu >= 0) os << ", MFU " << FormatFixed(100 * p.mfu, 1) << " %";
    if (p.above_published_mfu) {
      os << " (! above the GPU's best published MFU";
      if (p.published_mfu_ceiling > 0) os << ", " << FormatFixed(100 * p.published_mfu_ceiling, 1) << " %";
      os << ")";
    }
    if (p.memory_reserved_GiB >= 0) {
      os << ", " << FormatFixed(p.memory_reserved_GiB, 1) << " GiB reserved per GPU";
      if (p.memory_capacity_GiB > 0) os << " of " << FormatFixed(p.memory_capacity_GiB, 1);
    }
    os << "\n";
  }
  os << comment << " follows " << fe.follows.repository << " @ " << fe.follows.commit << " ("
     << fe.follows.version << "): " << fe.follows.files << "\n";
  if (p.c.pp > 1) {
    os << comment << " pipeline: transformer layers per rank " << Join(RankLayers(p));
    if (p.c.vpp > 1) os << "; per model chunk (virtual stage-major) " << Join(ChunkLayerList(p));
    os << "\n";
  }
  if (const std::string note = CheckpointNote(p); !note.empty()) {
    os << comment << " " << note << "\n";
  }
  for (const Keep& k : fe.keep(p)) {
    os << comment << " keep: " << k.name << "=" << k.value << " (" << k.why << ")\n";
  }
  os << comment << " launch: " << fe.launcher(p) << "\n";
  return os.str();
}

void KeepAllocator(const Plan& p, const char* var, std::vector<Keep>* keep) {
  if (!p.job.training.expandable_segments) return;
  keep->push_back({var, "expandable_segments:True",
                   "the memory verdict assumes PyTorch's allocator maps expandable segments; "
                   "fixed-size segments reserve about a third more, the framework preset's "
                   "allocator_fragmentation_fixed"});
}

std::string ShellHeader(const Plan& p, const FrameworkEmitter& fe, const char* what) {
  std::string out = Header(p, fe, "#", what);
  for (const Keep& k : fe.keep(p)) out += "export " + k.name + "=" + k.value + "\n";
  return out;
}

}  // namespace paratune::planner::emit_internal
