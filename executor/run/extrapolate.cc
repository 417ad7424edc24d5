#include "executor/run/extrapolate.h"

#include <algorithm>
#include <iterator>

#include "common/enum_names.h"

namespace paratune::executor {
namespace {

// The report term each workload category's time lands in.
constexpr Term kTermOfCategory[] = {Term::kCompute, Term::kCommX,    Term::kCommY,
                                    Term::kCommZ,   Term::kCommCp,   Term::kCommData,
                                    Term::kCommPp,  Term::kOptimizer};
static_assert(std::size(kTermOfCategory) == kNumCategories);
Term TermOf(Category c) { return EnumLookup(c, kTermOfCategory, Term::kCompute); }

// The weaker of two sources (measured < scaled < derived < modelled).
Source Weaker(Source a, Source b) { return static_cast<int>(a) >= static_cast<int>(b) ? a : b; }

// One stage's per-micro-batch figures.
struct StageFigures {
  double layer_compute = 0, layer_fwd = 0, layer_bwd = 0, layer_recompute = 0;
  std::array<double, kNumCategories> layer_exposed{};  // per layer
  double extra_compute = 0;                            // embedding, logits, loss
  std::array<double, kNumCategories> extra_comm{};     // logits collectives (synchronous)
  double p2p = 0;                                      // one forward + one backward hand-off
  double optimizer = 0;
  std::vector<int> step_ops;  // data-parallel step collectives
  double total = 0;           // one micro-batch through the stage
  bool overlap_measured = false;
};

StageFigures Figure(const StageTimes& st) {
  const Workload& w = *st.workload;
  StageFigures f;
  const double S = w.slice_layers;
  std::array<double, kNumCategories> raw_sync{}, raw_over{};
  double sync_total = 0;
  for (size_t i = 0; i < w.ops.size(); ++i) {
    const WorkOp& op = w.ops[i];
    const double t = st.op_s[i];
    const size_t cat = static_cast<size_t>(op.category);
    if (op.type != OpType::kCollective) {
      if (op.category == Category::kOptimizer) {
        f.optimizer += t;
      } else if (op.scope == Scope::kLayer) {
        f.layer_compute += t / S;
        if (op.phase == Phase::kForward) f.layer_fwd += t / S;
        if (op.phase == Phase::kBackward) f.layer_bwd += t / S;
        if (op.phase == Phase::kRecompute) f.layer_recompute += t / S;
        sync_total += t;
      } else {
        f.extra_compute += t;
        sync_total += t;
      }
      continue;
    }
    if (op.scope == Scope::kStep) {
      f.step_ops.push_back(static_cast<int>(i));
    } else if (op.category == Category::kCommPp) {
      f.p2p += t;
    } else if (op.scope == Scope::kStage) {
      f.extra_comm[cat] += t;
      sync_total += t;
    } else if (op.stream == StreamRole::kCompute) {
      raw_sync[cat] += t;
      sync_total += t;
    } else {
      raw_over[cat] += t;
    }
  }
  double over_total = 0;
  for (double v : raw_over) over_total += v;
  std::array<double, kNumCategories> exposed_over{};
  if (st.slice_s >= 0) {
    // The overlapped slice took what compute and synchronous collectives need,
    // plus whatever the overlapped collectives failed to hide.
    // The result is kept inside the physical band: no more than the
    // stand-alone time plus the SM share an overlapped collective takes, no
    // less than nothing (the slice's compute varies from run to run by more
    // than a small collective takes).
    f.overlap_measured = true;
    const double extra = std::max(0.0, st.slice_s - sync_total);
    if (over_total > 0) {
      for (size_t c = 0; c < exposed_over.size(); ++c) {
        exposed_over[c] =
            std::min(extra * raw_over[c] / over_total, (1.0 + kOverlapSmShare) * raw_over[c]);
      }
    }
  } else {
    // The cost model's rule, window by window.
    std::vector<double> comm(w.windows.size(), 0.0);
    std::vector<std::array<double, kNumCategories>> by_cat(w.windows.size());
    for (size_t i = 0; i < w.ops.size(); ++i) {
      const WorkOp& op = w.ops[i];
      if (op.type != OpType::kCollective || op.scope != Scope::kLayer ||
          op.stream == StreamRole::kCompute) {
        continue;
      }
      if (op.window < 0) {  // on a side stream with nothing to hide behind
        exposed_over[static_cast<size_t>(op.category)] += st.op_s[i];
        continue;
      }
      comm[static_cast<size_t>(op.window)] += st.op_s[i];
      by_cat[static_cast<size_t>(op.window)][static_cast<size_t>(op.category)] += st.op_s[i];
    }
    for (size_t wi = 0; wi < w.windows.size(); ++wi) {
      if (!(comm[wi] > 0)) continue;
      double window = 0;
      for (int op : w.windows[wi].compute_ops) window += st.op_s[static_cast<size_t>(op)];
      const double exposed = ExposedSeconds(comm[wi], window);
      for (size_t c = 0; c < kNumCategories; ++c)
        exposed_over[c] += exposed * by_cat[wi][c] / comm[wi];
    }
  }
  for (size_t c = 0; c < kNumCategories; ++c)
    f.layer_exposed[c] = (raw_sync[c] + exposed_over[c]) / S;
  double layer = f.layer_compute;
  for (double v : f.layer_exposed) layer += v;
  double extra = f.extra_compute;
  for (double v : f.extra_comm) extra += v;
  f.total = w.layers_per_stage * layer + extra;
  return f;
}

}  // namespace

double ExposedSeconds(double comm_s, double window_s) {
  return std::max(0.0, comm_s - window_s) + kOverlapSmShare * std::min(comm_s, window_s);
}

const char* ExtrapolationText() {
  return "iteration = micro_batches x slowest stage + (pp - 1)/vpp x mean stage (1F1B) + "
         "2 x vpp x micro_batches pipeline hand-offs + data-parallel sync + optimizer step; "
         "stage = layers_per_stage x (measured per-layer compute of the slice + exposed "
         "per-layer collectives) + the stage's embedding/logits; exposed collective time from "
         "the overlapped slice when every plan rank ran, else max(0, comm - window) + "
         "24/132 x min(comm, window) on measured times";
}

StepEstimate Extrapolate(const planner::ParallelConfig& c, const std::vector<StageTimes>& stages,
                         double offload_s, double host_s, double comm_ep_s) {
  PT_CHECK(static_cast<int>(stages.size()) == c.pp && !stages.empty());
  StepEstimate est;
  std::vector<StageFigures> fig;
  for (const StageTimes& st : stages) {
    PT_CHECK(st.workload != nullptr && st.op_s.size() == st.workload->ops.size() &&
             st.op_source.size() == st.workload->ops.size());
    fig.push_back(Figure(st));
    est.stage_s.push_back(fig.back().total);
  }
  const Workload& w0 = *stages.front().workload;
  const double n_mb = static_cast<double>(w0.micro_batches);
  const double L = w0.layers_per_stage;
  const double pp = c.pp, vpp = c.vpp;
  int crit = 0;
  double sum = 0;
  est.overlap_measured = true;
  for (size_t s = 0; s < fig.size(); ++s) {
    if (fig[s].total > fig[static_cast<size_t>(crit)].total) crit = static_cast<int>(s);
    sum += fig[s].total;
    est.overlap_measured = est.overlap_measured && fig[s].overlap_measured;
  }
  est.critical_stage = crit;
  const StageFigures& cf = fig[static_cast<size_t>(crit)];
  const double pipeline = n_mb * cf.total + (pp - 1.0) * (sum / pp) / vpp;

  // Pipeline hand-offs: activations forward and gradients backward, vpp times
  // per micro-batch; with overlap_p2p beside the stage's compute.
  double p2p = 0;
  for (const StageFigures& f : fig) p2p = std::max(p2p, f.p2p);
  double comm_pp = vpp * n_mb * p2p;
  if (c.overlap_p2p) comm_pp = ExposedSeconds(comm_pp, n_mb * L * cf.layer_compute);

  // Data-parallel step collectives and the optimizer: concurrent on every
  // stage, the slowest counts.
  double step_data = 0, optimizer = 0;
  for (size_t s = 0; s < fig.size(); ++s) {
    const StageTimes& st = stages[s];
    double d = 0;
    for (int i : fig[s].step_ops) {
      const WorkOp& op = st.workload->ops[static_cast<size_t>(i)];
      double t = st.op_s[static_cast<size_t>(i)];
      if (op.step_window == StepWindow::kStageBackward) {
        t = ExposedSeconds(t, L * (fig[s].layer_bwd + fig[s].layer_recompute));
      } else if (op.step_window == StepWindow::kStageForward) {
        t = ExposedSeconds(t, L * fig[s].layer_fwd);
      }
      d += t * static_cast<double>(op.per_step);
    }
    step_data = std::max(step_data, d);
    optimizer = std::max(optimizer, fig[s].optimizer);
  }

  auto& T = est.terms;
  auto at = [&](Term t) -> double& { return T[static_cast<size_t>(t)]; };
  auto lay = [&](Category cat) { return n_mb * L * cf.layer_exposed[static_cast<size_t>(cat)]; };
  at(Term::kCompute) = n_mb * (L * cf.layer_compute + cf.extra_compute);
  at(Term::kRecompute) = n_mb * L * cf.layer_recompute;
  at(Term::kCommX) =
      lay(Category::kCommX) + n_mb * cf.extra_comm[static_cast<size_t>(Category::kCommX)];
  at(Term::kCommY) =
      lay(Category::kCommY) + n_mb * cf.extra_comm[static_cast<size_t>(Category::kCommY)];
  at(Term::kCommZ) = lay(Category::kCommZ);
  at(Term::kCommCp) = lay(Category::kCommCp);
  const double data_in_pipeline = lay(Category::kCommData);
  at(Term::kCommData) = data_in_pipeline + step_data;
  at(Term::kCommPp) = comm_pp;
  at(Term::kOptimizer) = optimizer;
  at(Term::kOffload) = offload_s;
  at(Term::kHost) = host_s;
  at(Term::kCommEp) = comm_ep_s;
  const double accounted = at(Term::kCompute) + at(Term::kCommX) + at(Term::kCommY) +
                           at(Term::kCommZ) + at(Term::kCommCp) + data_in_pipeline;
  at(Term::kBubble) = std::max(0.0, pipeline - accounted);
  est.iteration_s = pipeline + comm_pp + step_data + optimizer + offload_s + host_s + comm_ep_s;

  // Sources: the weakest figure that went into each term.
  est.sources.fill(Source::kMeasured);
  for (const StageTimes& st : stages) {
    for (size_t i = 0; i < st.workload->ops.size(); ++i) {
      const WorkOp& op = st.workload->ops[i];
      if (op.type != OpType::kCollective) continue;
      Source& s = est.sources[static_cast<size_t>(TermOf(op.category))];
      s = Weaker(s, st.op_source[i]);
    }
  }
  if (c.pp > 1) est.sources[static_cast<size_t>(Term::kBubble)] = Source::kDerived;
  est.sources[static_cast<size_t>(Term::kOffload)] =
      offload_s > 0 ? Source::kModelled : Source::kMeasured;
  est.sources[static_cast<size_t>(Term::kHost)] = host_s > 0 ? Source::kModelled : Source::kMeasured;
  est.sources[static_cast<size_t>(Term::kCommEp)] =
      comm_ep_s > 0 ? Source::kModelled : Source::kMeasured;
  return est;
}

}  // namespace paratune::executor
