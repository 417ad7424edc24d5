#include "elastic/replan.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "common/strings.h"
#include "elastic/failure_policy.h"
#include "elastic/network_replan.h"
#include "planner/network_request.h"

namespace paratune::planner {
namespace {

// The running allocation and what is left of it: old rank r ran on GPU r, node
// r / gpus_per_node. Lost GPUs are removed; added GPUs are whole new nodes
// numbered after the running ones. New rank r runs on available[r].
Status BuildAllocation(const Job& job, const ReplanOptions& o, ReplanResult* r) {
  const int gpn = std::max(1, job.cluster.gpus_per_node);
  const int old = job.gpus;
  const int old_nodes = (old + gpn - 1) / gpn;
  const int given = (o.gpus > 0) + (o.lost_nodes > 0 || !o.lost_node_ids.empty()) + (o.add_nodes > 0);
  if (given != 1) {
    return Status::InvalidArgument("give exactly one of gpus, lost_nodes (or lost_node_ids), add_nodes");
  }
  std::set<int> lost;
  int added = 0;
  if (o.gpus > 0) {
    if (o.gpus > kMaxGpus)
      return Status::InvalidArgument("gpus: must be in [1, " + std::to_string(kMaxGpus) + "]");
    if (o.gpus < old) {
      for (int n = 0; n < old_nodes; ++n) {
        if (n * gpn >= o.gpus) lost.insert(n);
      }
    } else {
      added = o.gpus - old;
    }
  } else if (o.add_nodes > 0) {
    // In 64 bits: the product of two request numbers must not wrap.
    if (int64_t{o.add_nodes} * gpn + old > kMaxGpus) {
      return Status::InvalidArgument("add_nodes: " + std::to_string(o.add_nodes) + " nodes of " +
                                     std::to_string(gpn) + " GPUs exceed " +
                                     std::to_string(kMaxGpus) + " GPUs");
    }
    added = o.add_nodes * gpn;
  } else {
    if (o.lost_nodes > 0 && !o.lost_node_ids.empty()) {
      return Status::InvalidArgument("lost_nodes and lost_node_ids exclude each other");
    }
    if (o.lost_nodes >= old_nodes) {
      return Status::InvalidArgument("lost_nodes: " + std::to_string(o.lost_nodes) + " of " +
                                     std::to_string(old_nodes) + " nodes leaves no GPU");
    }
    for (int k = 0; k < o.lost_nodes; ++k) lost.insert(old_nodes - 1 - k);
    for (int id : o.lost_node_ids) {
      if (id < 0 || id >= old_nodes) {
        return Status::InvalidArgument("lost_node_ids: " + std::to_string(id) + " is not a node of the run (0-" +
                                       std::to_string(old_nodes - 1) + ")");
      }
      lost.insert(id);
    }
    if (static_cast<int>(lost.size()) >= old_nodes) {
      return Status::InvalidArgument("lost_node_ids: every node of the run is lost");
    }
  }
  Allocation& a = r->allocation;
  a.gpus_per_node = gpn;
  for (int g = 0; g < old; ++g) {
    if (o.gpus > 0 && o.gpus < old) {
      if (g >= o.gpus) continue;
    } else if (lost.count(g / gpn)) {
      continue;
    }
    a.surviving.push_back(g);
    a.new_gpus.push_back(g);
  }
  for (int k = 0; k < added; ++k) a.new_gpus.push_back(old_nodes * gpn + k);
  r->lost_nodes.assign(lost.begin(), lost.end());
  r->added_gpus = added;
  r->available_gpus = static_cast<int>(a.new_gpus.size());
  const int64_t nodes_now = old_nodes - static_cast<int64_t>(lost.size()) + (added + gpn - 1) / gpn;
  if (job.cluster.max_nodes > 0 && nodes_now > job.cluster.max_nodes) {
    return Status::InvalidArgument("the new allocation (" + std::to_string(nodes_now) + " nodes) exceeds the cluster (" +
                                   std::to_string(job.cluster.max_nodes) + " nodes)");
  }
  return Status::Ok();
}

bool Faster(const ReplanCandidate& a, const ReplanCandidate& b);

// The running layout on g GPUs: the same model-parallel block, g / block
// data-parallel replicas, each batch in `batches` (the first that lies in the
// search's space with its pins, Search::InSpace, passes the framework's rules
// and fits is kept). Empty when g is not a multiple of the block or no batch
// fits.
std::optional<ReplanCandidate> SameLayoutOn(const Job& old_job, const ParallelConfig& old_config,
                                            int g, const std::vector<int64_t>& batches,
                                            const SearchOptions& search,
                                            const Prediction& running) {
  const int64_t block = old_config.world() / old_config.gdata;
  if (g % block != 0) return std::nullopt;
  ParallelConfig c = old_config;
  c.gdata = static_cast<int>(g / block);
  for (int64_t batch : batches) {
    Job job = old_job;
    job.gpus = g;
    job.training.global_batch = batch;
    const CostModel cm(job.model, job.training, job.cluster, g);
    if (cm.CheckRules(c) != Reason::kOk || !Search(cm, search).InSpace(c)) continue;
    const Prediction p = cm.Predict(c);
    if (!p.fits) continue;
    ReplanCandidate rc;
    rc.candidate = Candidate{c, p, old_job.training.framework};
    rc.gpus = g;
    rc.global_batch = batch;
    rc.relative_step_time = p.iteration_time_s / running.iteration_time_s;
    rc.relative_tokens_per_s = p.tokens_per_s / running.tokens_per_s;
    rc.keeps_layout = true;
    return rc;
  }
  return std::nullopt;
}

// The batches a count may run with, in the order they are tried: the running
// one, and with the batch allowed to change, the running batch rounded to the
// nearest multiple of the new data width, then the other neighbouring
// multiple (the nearest can break an interleaved schedule's whole groups of
// micro-batches where the other keeps them), then for the running layout
// (`replica_share`) each replica's share kept (what dropping replicas does:
// the schedule's micro-batches stay as they were, so an interleaved
// schedule's whole groups do too).
std::vector<int64_t> BatchesFor(const ParallelConfig& old_config, int64_t B, int g, bool allow_change,
                                bool replica_share) {
  std::vector<int64_t> out = {B};
  const int64_t block = old_config.world() / old_config.gdata;
  if (!allow_change || g % block != 0) return out;
  const int64_t q = (g / block) * int64_t{old_config.gz};
  const int64_t q_old = int64_t{old_config.gdata} * old_config.gz;
  auto add = [&](int64_t b) {
    if (b >= 1 && std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
  };
  const int64_t nearest = std::max<int64_t>(q, std::llround(static_cast<double>(B) / q) * q);
  add(nearest);
  add(nearest >= B ? nearest - q : nearest + q);
  if (replica_share && B % q_old == 0) add(B / q_old * q);
  return out;
}

bool SameRow(const ReplanCandidate& a, const ReplanCandidate& b) {
  return a.gpus == b.gpus && a.global_batch == b.global_batch &&
         a.candidate.framework == b.candidate.framework && a.candidate.config == b.candidate.config;
}

// Operators' order: the running layout with fewer replicas first, unless
// another candidate is faster by more than that one's uncertainty band; then
// the rest by throughput. The running layout stays among the first `rows`
// whatever its rank, so the comparison is always on the table.
void RankAsOperatorsDo(std::vector<ReplanCandidate>* all, int rows) {
  std::sort(all->begin(), all->end(), Faster);
  auto keep = std::find_if(all->begin(), all->end(),
                           [](const ReplanCandidate& c) { return c.keeps_layout; });
  if (keep == all->end() || keep == all->begin()) return;
  const double band = keep->candidate.prediction.uncertainty;
  if (all->front().candidate.prediction.tokens_per_s >
      keep->candidate.prediction.tokens_per_s * (1 + band)) {
    // A change of layout buys more than the model can tell apart.
    const auto last_row = all->begin() + std::max(0, rows - 1);
    if (keep > last_row) std::rotate(last_row, keep, keep + 1);
    return;
  }
  std::rotate(all->begin(), keep, keep + 1);
}

bool Faster(const ReplanCandidate& a, const ReplanCandidate& b) {
  if (a.candidate.prediction.tokens_per_s != b.candidate.prediction.tokens_per_s) {
    return a.candidate.prediction.tokens_per_s > b.candidate.prediction.tokens_per_s;
  }
  if (a.gpus != b.gpus) return a.gpus < b.gpus;  // the same speed on fewer GPUs
  return ConfigToString(a.candidate.config) < ConfigToString(b.candidate.config);
}

}  // namespace

Result<ReplanResult> Replan(const Job& old_job, const ParallelConfig& old_config, const ReplanOptions& options,
                            const SearchRunner& run) {
  ReplanResult r;
  r.old_job = old_job;
  r.old_config = old_config;
  {
    CostModel cm(old_job.model, old_job.training, old_job.cluster, old_job.gpus);
    PT_RETURN_IF_ERROR(ValidateConfig(cm, old_config).WithContext("the running configuration"));
    r.old_prediction = cm.Predict(old_config);
  }
  PT_RETURN_IF_ERROR(BuildAllocation(old_job, options, &r));
  if (options.search.top_k < 1) return Status::InvalidArgument("top must be >= 1");
  PT_RETURN_IF_ERROR(ValidateFixed(options.search.fixed));

  const int avail = r.available_gpus;
  const int gpn = std::max(1, old_job.cluster.gpus_per_node);
  const int step = options.gpu_step > 0 ? options.gpu_step : (avail >= gpn ? gpn : 1);
  const int min_gpus = options.min_gpus > 0 ? std::min(options.min_gpus, avail) : std::max(1, (avail + 1) / 2);
  // Counts: every GPU available, then whole steps below it.
  std::vector<int> counts = {avail};
  for (int g = (avail % step == 0 ? avail - step : avail / step * step); g >= min_gpus && counts.size() < 64; g -= step) {
    if (g >= 1) counts.push_back(g);
  }
  const int64_t B = old_job.training.global_batch;
  // The running layout's model-parallel block (everything but plain data
  // parallelism): the same layout runs on multiples of it.
  const int64_t block = old_config.world() / old_config.gdata;
  SearchOptions sopt = options.search;
  sopt.objective = Objective::kTime;
  sopt.keep_pareto = false;
  sopt.memory_only = false;
  sopt.count_faster_than_s = -1;
  int fitting_counts = 0;
  std::vector<ReplanCandidate> all;
  // The running layout with fewer replicas, on the most GPUs it fits: found
  // whatever the search's own top rows hold, and whatever --max-counts stops.
  const int most_same = static_cast<int>(avail / block * block);
  for (int g = most_same; g >= min_gpus && g > 0; g -= static_cast<int>(block)) {
    if (auto same = SameLayoutOn(
            old_job, old_config, g,
            BatchesFor(old_config, B, g, options.allow_global_batch_change, true), sopt,
            r.old_prediction)) {
      all.push_back(*same);
      break;
    }
  }
  if (!options.allow_global_batch_change && most_same > 0 &&
      (all.empty() || all.front().gpus < most_same)) {
    std::vector<int64_t> changed = BatchesFor(old_config, B, most_same, true, true);
    changed.erase(changed.begin());  // the kept batch: tried above
    r.same_layout_with_batch_change =
        SameLayoutOn(old_job, old_config, most_same, changed, sopt, r.old_prediction);
  }
  for (int g : counts) {
    const std::vector<int64_t> batches =
        BatchesFor(old_config, B, g, options.allow_global_batch_change, false);
    bool any = false;
    for (int64_t batch : batches) {
      Job job = old_job;
      job.gpus = g;
      job.training.global_batch = batch;
      CostModel cm(job.model, job.training, job.cluster, g);
      Search search(cm, sopt);
      SearchResult res = run ? run(search) : search.RunAll();
      r.searched.push_back({g, batch, res.evaluated, res.feasible});
      for (const Candidate& c : res.top) {
        ReplanCandidate rc;
        rc.candidate = c;
        rc.gpus = g;
        rc.global_batch = batch;
        rc.relative_step_time = c.prediction.iteration_time_s / r.old_prediction.iteration_time_s;
        rc.relative_tokens_per_s = c.prediction.tokens_per_s / r.old_prediction.tokens_per_s;
        if (std::none_of(all.begin(), all.end(), [&](const ReplanCandidate& o) { return SameRow(o, rc); })) {
          all.push_back(rc);
        }
        any = true;
      }
    }
    if (any && ++fitting_counts >= options.max_counts) break;
  }
  RankAsOperatorsDo(&all, options.search.top_k);
  if (static_cast<int>(all.size()) > options.search.top_k) all.resize(options.search.top_k);
  r.candidates = std::move(all);
  for (const auto& c : r.candidates) r.global_batch_changed = r.global_batch_changed || c.global_batch != B;

  if (options.reshard_candidate > 0 && !r.candidates.empty()) {
    if (options.reshard_candidate > static_cast<int>(r.candidates.size())) {
      return Status::InvalidArgument("reshard_candidate: " + std::to_string(options.reshard_candidate) + " but only " +
                                     std::to_string(r.candidates.size()) + " candidates");
    }
    const ParallelConfig& to = r.candidates[options.reshard_candidate - 1].candidate.config;
    // The checkpoint holds the tensors of the model the job trains (a learned
    // position table extended to the sequence), as the cost model priced it.
    const ModelSpec trained = ModelAtSequence(old_job.model, old_job.training.seq_len);
    PT_ASSIGN_OR_RETURN(Layout from_l, Layout::Make(trained, old_config, old_job.training.precision,
                                                    old_job.training.main_grads_fp32));
    PT_ASSIGN_OR_RETURN(Layout to_l, Layout::Make(trained, to, old_job.training.precision,
                                                  old_job.training.main_grads_fp32));
    if (options.reshard.keep_rank >= to_l.world()) {
      return Status::InvalidArgument("fragments_of: rank " + std::to_string(options.reshard.keep_rank) +
                                     " but the candidate has " + std::to_string(to_l.world()) + " ranks");
    }
    r.reshard = ComputeReshard(from_l, to_l, r.allocation, old_job.cluster, options.reshard);
    r.reshard_from = std::move(from_l);
    r.reshard_to = std::move(to_l);
    // The expert layout is Megatron-Core's folding (replicas over edp);
    // torchtitan's FSDP2 shards the experts over its efsdp ranks instead.
    if (old_job.model.is_moe() && old_config.gz == 1 && to.gz == 1) {
      PT_ASSIGN_OR_RETURN(r.experts, PlanExpertMove(old_job.model, old_config, to,
                                                    old_job.training.precision,
                                                    old_job.cluster));
    }
  }
  return r;
}

Result<ExpertMove> PlanExpertMove(const ModelSpec& m, const ParallelConfig& from,
                                  const ParallelConfig& to, topology::Precision precision,
                                  const topology::ClusterSpec& cluster) {
  auto layout = [](const ParallelConfig& c) {
    const int stage_ranks = static_cast<int>(c.world() / c.pp);
    const int ep = std::max(1, c.ep), etp = std::max(1, c.etp);
    return ExpertLayout{ep, etp, std::max(1, stage_ranks / (ep * etp))};
  };
  ExpertMove out;
  out.from = layout(from);
  out.to = layout(to);
  PT_ASSIGN_OR_RETURN(const ExpertReshardPlan same, PlanExpertReshard(m, out.from, out.to));
  PT_ASSIGN_OR_RETURN(const PipelineLayout pf,
                      MakePipelineLayout(m.layers, from.pp, from.vpp, from.first_stage_layers,
                                         from.last_stage_layers));
  PT_ASSIGN_OR_RETURN(const PipelineLayout pt,
                      MakePipelineLayout(m.layers, to.pp, to.vpp, to.first_stage_layers,
                                         to.last_stage_layers));
  // What one new stage-local rank holds of one MoE layer.
  const int64_t per_rank = same.params_needed / out.to.ranks();
  std::vector<int64_t> stage_in(to.pp, 0);
  for (int l = 0; l < m.layers; ++l) {
    if (!m.is_moe_layer(l)) continue;
    ++out.moe_layers;
    const int s_new = pt.StageOfChunk(pt.ChunkOfLayer(l));
    const bool stays = pf.StageOfChunk(pf.ChunkOfLayer(l)) == s_new;
    out.layers_changing_stage += stays ? 0 : 1;
    out.params_needed += same.params_needed;
    out.params_kept += stays ? same.params_kept : 0;
    stage_in[s_new] += stays ? same.max_rank_params_in : per_rank;
  }
  out.params_moved = out.params_needed - out.params_kept;
  out.max_rank_params_in = *std::max_element(stage_in.begin(), stage_in.end());
  const bool wide = topology::TrainsInFp32(precision);
  const double optimizer = (wide ? 0.0 : 4.0) + 8.0;  // master (below fp32), Adam m and v
  const bool sharded = to.distributed_optimizer || to.zero > 0;
  const double per_param = (wide ? 4.0 : 2.0) + optimizer / (sharded ? out.to.edp : 1);
  out.bytes_moved = static_cast<double>(out.params_moved) * per_param;
  const double node_GBps = cluster.NodeInjectionGBps();
  if (out.params_moved > 0 && node_GBps > 0) {
    const double nodes = std::ceil(static_cast<double>(to.world()) / cluster.gpus_per_node);
    out.cross_node_s = std::max(
        static_cast<double>(out.max_rank_params_in) * per_param / (cluster.InterNodeGBpsPerGpu() * 1e9),
        out.bytes_moved / (nodes * node_GBps * 1e9));
  }
  return out;
}

OrderedJson ReplanToJson(const ReplanResult& r, const ReplanOptions& options) {
  CostModel old_cm(r.old_job.model, r.old_job.training, r.old_job.cluster, r.old_job.gpus);
  OrderedJson doc;
  doc["schema"] = kReplanSchema;
  doc["model"] = r.old_job.model.name;
  doc["cluster"] = r.old_job.cluster.name;
  doc["cluster_fingerprint"] = topology::Fingerprint(r.old_job.cluster);
  OrderedJson from;
  from["gpus"] = r.old_job.gpus;
  from["global_batch"] = r.old_job.training.global_batch;
  from["config"] = ConfigToJson(r.old_config);
  from["config_string"] = ConfigText(r.old_job.training.framework, r.old_config);
  from["prediction"] = PredictionFields(r.old_prediction, old_cm);
  doc["from"] = from;
  OrderedJson alloc;
  alloc["gpus_per_node"] = r.allocation.gpus_per_node;
  alloc["old_gpus"] = r.old_job.gpus;
  alloc["lost_nodes"] = r.lost_nodes;
  alloc["lost_gpus"] = r.old_job.gpus - static_cast<int>(r.allocation.surviving.size());
  alloc["added_gpus"] = r.added_gpus;
  alloc["available_gpus"] = r.available_gpus;
  doc["allocation"] = alloc;
  doc["global_batch_policy"] = options.allow_global_batch_change ? "allow_change" : "keep";
  doc["global_batch_changed"] = r.global_batch_changed;
  OrderedJson warnings = OrderedJson::array();
  if (r.global_batch_changed) {
    warnings.push_back("some candidates change the global batch from " + std::to_string(r.old_job.training.global_batch) +
                       " sequences: the optimisation changes (learning-rate schedule, tokens per step); "
                       "compare relative_tokens_per_s, not relative_step_time");
  }
  if (r.candidates.empty()) {
    warnings.push_back("no configuration fits on " + std::to_string(r.available_gpus) +
                       " GPUs or the counts below it that were searched" +
                       (options.allow_global_batch_change ? "" : "; --allow-global-batch-change may help"));
  }
  if (const auto& s = r.same_layout_with_batch_change) {
    warnings.push_back("the running layout keeps " + std::to_string(s->gpus) + " GPUs at global batch " +
                       std::to_string(s->global_batch) + " at " +
                       FormatFixed(s->relative_tokens_per_s, 3) +
                       "x the running tokens/s; rerun with --allow-global-batch-change to rank it");
  }
  if (r.reshard && r.old_job.model.is_moe() && !r.experts) {
    warnings.push_back(
        "the routed experts' move is not mapped: their layout is modelled as Megatron-Core folds "
        "them (ep x etp x edp replicas), and FSDP2 (gz > 1) shards them instead");
  }
  doc["warnings"] = warnings;
  doc["space"] = FamilyName(options.search.family);
  OrderedJson fixed = OrderedJson::object();
  for (const auto& [k, v] : options.search.fixed) fixed[k] = v;
  doc["fixed"] = fixed;
  doc["ranked_by"] = "tokens_per_s";
  OrderedJson searched = OrderedJson::array();
  for (const auto& s : r.searched) {
    OrderedJson row;
    row["gpus"] = s.gpus;
    row["global_batch"] = s.global_batch;
    row["evaluated"] = s.evaluated;
    row["feasible"] = s.feasible;
    searched.push_back(row);
  }
  doc["searched"] = searched;
  OrderedJson cands = OrderedJson::array();
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    const ReplanCandidate& c = r.candidates[i];
    Job job = r.old_job;
    job.gpus = c.gpus;
    job.training.global_batch = c.global_batch;
    CostModel cm(job.model, job.training, job.cluster, c.gpus);
    OrderedJson cj;
    cj["rank"] = static_cast<int>(i) + 1;
    cj["gpus"] = c.gpus;
    cj["idle_gpus"] = r.available_gpus - c.gpus;
    cj["global_batch"] = c.global_batch;
    cj["global_batch_changed"] = c.global_batch != r.old_job.training.global_batch;
    cj["config"] = ConfigToJson(c.candidate.config);
    cj["config_string"] = ConfigText(c.candidate.framework, c.candidate.config);
    cj["prediction"] = PredictionFields(c.candidate.prediction, cm);
    cj["relative_step_time"] = c.relative_step_time;
    cj["relative_tokens_per_s"] = c.relative_tokens_per_s;
    cj["keeps_layout"] = c.keeps_layout;
    cands.push_back(cj);
  }
  doc["candidates"] = cands;
  if (const auto& s = r.same_layout_with_batch_change) {
    OrderedJson same;
    same["gpus"] = s->gpus;
    same["global_batch"] = s->global_batch;
    same["config"] = ConfigToJson(s->candidate.config);
    same["config_string"] = ConfigText(s->candidate.framework, s->candidate.config);
    same["iteration_time_s"] = s->candidate.prediction.iteration_time_s;
    same["relative_tokens_per_s"] = s->relative_tokens_per_s;
    doc["same_layout_with_batch_change"] = same;
  } else {
    doc["same_layout_with_batch_change"] = nullptr;
  }
  if (r.reshard) {
    doc["reshard_candidate"] = options.reshard_candidate;
    doc["reshard"] = ReshardToJson(*r.reshard, *r.reshard_from, *r.reshard_to, options.reshard);
  } else {
    doc["reshard_candidate"] = nullptr;
    doc["reshard"] = nullptr;
  }
  if (r.experts) {
    const ExpertMove& e = *r.experts;
    auto lay = [](const ExpertLayout& l) {
      OrderedJson j;
      j["ep"] = l.ep;
      j["etp"] = l.etp;
      j["edp"] = l.edp;
      return j;
    };
    OrderedJson x;
    x["from"] = lay(e.from);
    x["to"] = lay(e.to);
    x["moe_layers"] = e.moe_layers;
    x["layers_changing_stage"] = e.layers_changing_stage;
    x["params_needed"] = e.params_needed;
    x["params_kept"] = e.params_kept;
    x["params_moved"] = e.params_moved;
    x["bytes_moved"] = e.bytes_moved;
    x["max_rank_params_in"] = e.max_rank_params_in;
    x["cross_node_s"] = e.cross_node_s;
    doc["experts"] = x;
  } else {
    doc["experts"] = nullptr;
  }
  // After lost nodes: continuing on the reshard candidate against waiting for
  // the repair or a spare (elastic/failure_policy.h), null otherwise.
  if (!r.lost_nodes.empty() && r.added_gpus == 0 && r.reshard) {
    const Goodput g = GoodputOf(r.old_job, r.old_job.training.framework, r.old_config, r.old_prediction,
                                options.goodput);
    const FailurePolicies f = CompareFailurePolicies(r.old_job, g, options.goodput,
                                                     ShrinkFromReplan(r, options.reshard_candidate));
    doc["continue_or_wait"] = FailurePoliciesToJson(f);
  } else {
    doc["continue_or_wait"] = nullptr;
  }
  return doc;
}

namespace {

// A plans document's goodput_inputs (planner/plans.cc writes them): the run's
// token budget and what it assumed. Each number present must be finite and
// in range; the flags that say a value was a default are ignored.
Status ReadGoodputInputs(const Json& g, const std::string& pointer, GoodputOptions* o) {
  if (!g.is_object()) return Status::InvalidArgument(pointer + ": must be an object");
  auto number = [&](const char* key, double* out, double lo, double hi) -> Status {
    if (!g.contains(key) || g[key].is_null()) return Status::Ok();
    if (!g[key].is_number() || !std::isfinite(g[key].get<double>()) || g[key].get<double>() < lo ||
        g[key].get<double>() > hi) {
      return Status::InvalidArgument(pointer + "/" + key + ": must be a number in [" +
                                     FormatFixed(lo, 0) + ", " + FormatFixed(hi, 0) + "]");
    }
    *out = g[key].get<double>();
    return Status::Ok();
  };
  PT_RETURN_IF_ERROR(number("tokens", &o->tokens, 0, 1e18));
  PT_RETURN_IF_ERROR(number("fs_GBps", &o->fs_GBps, 1e-9, 1e9));
  PT_RETURN_IF_ERROR(number("fs_node_GBps", &o->fs_node_GBps, 0, 1e9));
  PT_RETURN_IF_ERROR(number("failures_per_gpu_hour", &o->failures_per_gpu_hour, 0, 1e6));
  PT_RETURN_IF_ERROR(number("restart_s", &o->restart_s, 1e-9, 1e9));
  PT_RETURN_IF_ERROR(number("min_interval_s", &o->min_interval_s, 0, 1e9));
  PT_RETURN_IF_ERROR(number("gpu_hour_price", &o->gpu_hour_price, 0, 1e12));
  PT_RETURN_IF_ERROR(number("repair_s", &o->repair_s, 0, 1e9));
  if (g.contains("save")) {
    if (g["save"] != "auto" && g["save"] != "sync") {
      return Status::InvalidArgument(pointer + "/save: must be auto or sync");
    }
    o->save = g["save"] == "sync" ? CheckpointSave::kSync : CheckpointSave::kAuto;
  }
  return Status::Ok();
}

}  // namespace

Result<ReplanInput> ParseReplanFrom(const Json& from, int rank, const std::string& pointer) {
  ReplanInput in;
  if (!from.is_object()) return Status::InvalidArgument(pointer + ": must be a plans document or a predict request");
  if (from.contains("schema") && !from["schema"].is_string()) {
    return Status::InvalidArgument(pointer + "/schema: must be \"" + std::string(kPlansSchema) +
                                   "\" or a predict request's schema");
  }
  if (IsNetworkPlans(from)) {
    return Status::InvalidArgument(pointer + "/schema: " + planner::kNetworkPlansNotEmitted);
  }
  if (from.contains("schema") && from["schema"] == kPlansSchema) {
    auto job = JobFromPlans(from);
    if (!job.ok()) return job.status().WithContext(pointer);
    in.job = *job;
    auto listed = CandidatesFromPlans(from);
    if (!listed.ok()) return listed.status().WithContext(pointer);
    const std::vector<ParallelConfig>& cands = *listed;
    if (rank < 1 || rank > static_cast<int>(cands.size())) {
      return Status::InvalidArgument(pointer + "/candidates: rank " + std::to_string(rank) + " but the document has " +
                                     std::to_string(cands.size()) + " candidates");
    }
    in.config = cands[rank - 1];
    // The running job uses the framework of the chosen candidate (a run does
    // not change stacks when it is replanned).
    const Json& cj = from["candidates"][static_cast<size_t>(rank - 1)];
    if (cj.contains("framework") && cj["framework"].is_string()) {
      auto fw = ParseFramework(cj["framework"].get<std::string>());
      if (!fw.ok()) {
        return Status::InvalidArgument(pointer + "/candidates/" + std::to_string(rank - 1) +
                                       "/framework: " + fw.status().message());
      }
      in.job.training.framework = *fw;
    }
    if (from.contains("space") && from["space"].is_string()) {
      PT_ASSIGN_OR_RETURN(in.options.search.family, ParseFamily(from["space"].get<std::string>()));
    }
    if (from.contains("fixed") && from["fixed"].is_object()) {
      for (auto& [k, v] : from["fixed"].items()) {
        if (!v.is_string()) return Status::InvalidArgument(pointer + "/fixed/" + k + ": must be a string");
        in.options.search.fixed.push_back({k, v.get<std::string>()});
      }
    }
    if (from.contains("goodput_inputs")) {
      PT_RETURN_IF_ERROR(
          ReadGoodputInputs(from["goodput_inputs"], pointer + "/goodput_inputs", &in.options.goodput));
    }
    return in;
  }
  if (rank != 1) return Status::InvalidArgument("rank: only a plans document has ranked candidates");
  auto resolved = scenario::ResolvePredict(from);
  if (!resolved.ok()) return resolved.status().WithContext(pointer);
  in.job = resolved->request.job;
  in.config = resolved->request.config;
  in.profile_path = resolved->request.profile_path;
  in.assumed = std::move(resolved->assumed);
  return in;
}

Result<ReplanInput> ParseReplanRequest(const Json& j) {
  ObjectReader r(j, "");
  if (r.Has("schema")) {
    std::string schema;
    PT_RETURN_IF_ERROR(r.String("schema", &schema));
    if (schema != kReplanRequestSchema) return r.Error("schema", "must be \"" + std::string(kReplanRequestSchema) + "\"");
  }
  if (!r.Has("from")) return r.Error("from", "is required (a plans document or a predict request)");
  int rank = 1;
  PT_RETURN_IF_ERROR(r.OptInt("rank", &rank));
  PT_ASSIGN_OR_RETURN(ReplanInput in, ParseReplanFrom(r.Raw("from"), rank, "/from"));
  ReplanOptions& o = in.options;
  PT_RETURN_IF_ERROR(r.OptInt("gpus", &o.gpus));
  PT_RETURN_IF_ERROR(r.OptInt("lost_nodes", &o.lost_nodes));
  PT_RETURN_IF_ERROR(r.OptInt("add_nodes", &o.add_nodes));
  if (o.gpus < 0 || o.lost_nodes < 0 || o.add_nodes < 0) {
    return Status::InvalidArgument("gpus, lost_nodes and add_nodes must be >= 0");
  }
  for (const auto& [key, v] : {std::pair<const char*, int>{"gpus", o.gpus},
                               {"lost_nodes", o.lost_nodes},
                               {"add_nodes", o.add_nodes}}) {
    if (v > kMaxGpus) return r.Error(key, "must be at most " + std::to_string(kMaxGpus));
  }
  if (r.Has("lost_node_ids")) {
    const Json& ids = r.Raw("lost_node_ids");
    if (!ids.is_array()) return r.Error("lost_node_ids", "must be an array of node indices");
    for (const Json& v : ids) {
      // Read as 64 bits and range-checked: 2^32+3 must not become node 3.
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= kMaxGpus)
        return r.Error("lost_node_ids",
                       "must be an array of node indices in [0, " + std::to_string(kMaxGpus) + ")");
      if (ids.size() > static_cast<size_t>(kMaxGpus))
        return r.Error("lost_node_ids", "lists more nodes than a run has");
      o.lost_node_ids.push_back(static_cast<int>(v.get<int64_t>()));
    }
  }
  PT_RETURN_IF_ERROR(r.OptBool("allow_global_batch_change", &o.allow_global_batch_change));
  std::string space;
  PT_RETURN_IF_ERROR(r.OptString("space", &space));
  if (!space.empty()) {
    auto f = ParseFamily(space);
    if (!f.ok()) return r.Error("space", f.status().message());
    o.search.family = *f;
  }
  std::string fix;
  PT_RETURN_IF_ERROR(r.OptString("fix", &fix));
  if (!fix.empty()) {
    auto kv = ConfigTextToPairs(fix);
    if (!kv.ok()) return r.Error("fix", kv.status().message());
    o.search.fixed = *kv;
    if (Status s = ValidateFixed(o.search.fixed); !s.ok()) return r.Error("fix", s.message());
  }
  PT_RETURN_IF_ERROR(r.OptInt("top", &o.search.top_k));
  if (o.search.top_k < 1 || o.search.top_k > 10000) return r.Error("top", "must be in [1, 10000]");
  PT_RETURN_IF_ERROR(r.OptInt("min_gpus", &o.min_gpus));
  PT_RETURN_IF_ERROR(r.OptInt("gpu_step", &o.gpu_step));
  PT_RETURN_IF_ERROR(r.OptInt("max_counts", &o.max_counts));
  if (o.min_gpus < 0 || o.gpu_step < 0 || o.max_counts < 1) {
    return Status::InvalidArgument("min_gpus and gpu_step must be >= 0, max_counts >= 1");
  }
  // The filesystem the plans document priced its checkpoints at, else the
  // default (kDefaultCheckpointFsGBps); the request's fs_GBps replaces it for
  // both the reshard map and the failure policies.
  o.reshard.fs_GBps = o.goodput.fs_GBps;
  PT_RETURN_IF_ERROR(r.OptNumber("fs_GBps", &o.reshard.fs_GBps));
  if (!(o.reshard.fs_GBps > 0) || !std::isfinite(o.reshard.fs_GBps)) return r.Error("fs_GBps", "must be > 0");
  // The run's checkpoints are read at the bandwidth the reshard map uses.
  o.goodput.fs_GBps = o.reshard.fs_GBps;
  PT_RETURN_IF_ERROR(r.OptNumber("repair_s", &o.goodput.repair_s));
  if (!(o.goodput.repair_s >= 0) || !(o.goodput.repair_s <= 1e9))
    return r.Error("repair_s", "must be a number of seconds in [0, 1e9]");
  if (r.Has("restart_s")) {
    PT_RETURN_IF_ERROR(r.Number("restart_s", &o.goodput.restart_s));
    if (!(o.goodput.restart_s > 0) || !(o.goodput.restart_s <= 1e9))
      return r.Error("restart_s", "must be a number of seconds in (0, 1e9]");
  }
  PT_RETURN_IF_ERROR(r.OptInt("reshard_candidate", &o.reshard_candidate));
  if (o.reshard_candidate < 0) return r.Error("reshard_candidate", "must be >= 0 (0 = no reshard map)");
  if (r.Has("fragments_of")) {
    const Json& f = r.Raw("fragments_of");
    if (f.is_string() && f.get<std::string>() == "all") {
      o.reshard.keep_all = true;
    } else if (f.is_number_integer() && f.get<int64_t>() >= 0) {
      o.reshard.keep_rank = f.get<int>();
    } else {
      return r.Error("fragments_of", "must be a new rank (>= 0) or \"all\"");
    }
  }
  PT_RETURN_IF_ERROR(r.OptBool("include_gradients", &o.reshard.include_gradients));
  PT_RETURN_IF_ERROR(r.Finish());
  return in;
}

Result<OrderedJson> ReplanDocument(const Json& request, const SearchRunner& run,
                                   const std::function<bool()>& expired) {
  if (IsNetworkReplan(request)) return NetworkReplanDocument(request, expired);
  PT_ASSIGN_OR_RETURN(ReplanInput in, ParseReplanRequest(request));
  PT_ASSIGN_OR_RETURN(ReplanResult r, Replan(in.job, in.config, in.options, run));
  OrderedJson doc = ReplanToJson(r, in.options);
  doc["assumed"] = scenario::AssumedToJson(in.assumed);
  return doc;
}

}  // namespace paratune::planner
