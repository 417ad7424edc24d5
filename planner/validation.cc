#include "planner/validation.h"

#include <algorithm>

namespace paratune::planner {
namespace {

bool Contains(const Json& j, const char* needle) {
  if (!j.is_string()) return false;
  std::string s = j.get<std::string>();
  std::transform(s.begin(), s.end(), s.begin(), ::tolower);
  return s.find(needle) != std::string::npos;
}

int IntOr(const Json& j, const char* key, int def) {
  if (!j.contains(key) || !j[key].is_number()) return def;
  return j[key].get<int>();
}

}  // namespace

Result<std::vector<PublishedRun>> PublishedRunsFromCalibration(const Json& doc,
                                                               const std::string& cluster_preset) {
  if (!doc.is_array()) return Status::InvalidArgument("calibration: the document must be an array");
  PT_ASSIGN_OR_RETURN(topology::ClusterSpec cluster, topology::ClusterPreset(cluster_preset));
  std::vector<PublishedRun> runs;
  for (const Json& row : doc) {
    const std::string id = row.value("id", std::string("?"));
    if (row.value("row_type", std::string()) != "throughput") continue;
    if (!row.contains("model") || !row.contains("parallel") || !row.contains("hardware")) {
      return Status::InvalidArgument("calibration row " + id + ": needs model, parallel, hardware");
    }
    const Json& mj = row["model"];
    const Json& pj = row["parallel"];
    const Json& hj = row["hardware"];
    PublishedRun run;
    run.id = id;
    run.source = row.value("source", std::string());
    ModelSpec& m = run.request.job.model;
    m.name = mj.value("name", id);
    m.layers = IntOr(mj, "layers", 0);
    m.hidden = IntOr(mj, "hidden", 0);
    m.heads = IntOr(mj, "heads", 0);
    m.kv_heads = IntOr(mj, "kv_heads", m.heads);
    m.ffn_hidden = IntOr(mj, "ffn_hidden", 4 * m.hidden);
    m.vocab = IntOr(mj, "vocab", 0);
    m.gated_ffn = false;
    m.tied_embeddings = true;
    m.dropout = true;
    m.linear_bias = true;
    m.norm = "layernorm";
    m.max_seq_len = IntOr(mj, "seq_len", 2048);
    if (Status s = ValidateModel(m, "/model"); !s.ok()) return s.WithContext("calibration row " + id);

    run.request.job.cluster = cluster;
    run.request.job.gpus = IntOr(hj, "num_gpus", 0);
    if (hj.contains("gpus_per_node") && hj["gpus_per_node"].is_number() &&
        hj["gpus_per_node"].get<int>() != cluster.gpus_per_node) {
      return Status::InvalidArgument("calibration row " + id + ": gpus_per_node differs from " +
                                     cluster_preset);
    }
    TrainingSpec& t = run.request.job.training;
    t.seq_len = m.max_seq_len;
    t.precision = topology::Precision::kBf16;  // fp16/bf16 mixed: same peak and widths
    t.attention = Attention::kUnfused;
    const int dp = IntOr(pj, "dp", 1);
    const int mbs = IntOr(pj, "microbatch", 1);
    if (pj.contains("global_batch") && pj["global_batch"].is_number()) {
      t.global_batch = pj["global_batch"].get<int64_t>();
    } else {
      continue;  // no batch stated: the row cannot be predicted
    }
    ParallelConfig& c = run.request.config;
    c.gy = IntOr(pj, "tp", 1);
    c.pp = IntOr(pj, "pp", 1);
    c.vpp = std::max(1, IntOr(pj, "virtual_pp", 1));
    c.gdata = dp;
    c.mbs = mbs;
    c.sp = Contains(pj["sp_or_cp"], "sequence parallel") || Contains(pj["sp_or_cp"], "sp");
    if (Contains(pj["recompute"], "full")) c.recompute = Recompute::kFull;
    else if (Contains(pj["recompute"], "selective")) c.recompute = Recompute::kSelective;
    c.oar = true;  // Megatron-LM's asynchronous tensor-parallel all-reduce (on by default)
    c.zero = IntOr(pj, "zero_stage", 0);
    if (run.request.job.gpus != c.world()) {
      return Status::InvalidArgument("calibration row " + id + ": degrees do not multiply to num_gpus");
    }
    const Json& meas = row.value("measured", Json::object());
    if (meas.contains("iter_time_s") && meas["iter_time_s"].is_number()) {
      run.measured_iteration_s = meas["iter_time_s"].get<double>();
    }
    if (meas.contains("mfu") && meas["mfu"].is_number()) run.measured_mfu = meas["mfu"].get<double>();
    runs.push_back(std::move(run));
  }
  return runs;
}

}  // namespace paratune::planner
