// One candidate's run: set-up (groups, streams, memory), the compute,
// communication and slice passes, and tear-down. Every phase keeps the SPMD
// discipline described in runner.h.
#include "executor/run/candidate.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <sstream>

#include "executor/run/extrapolate.h"
#include "executor/run/moe_layer.h"
#include "planner/plans.h"

namespace paratune::executor::detail {

Verdict Agree(HostPlane& host, const Status& mine, bool waive) {
  if (host.broken())
    return {Outcome::kFailed, "the host control plane failed: " + host.broken_status().message()};
  std::string msg;
  if (!mine.ok())
    msg = std::string(waive ? "W" : backend::IsOutOfMemory(mine) ? "O" : "E") + mine.message();
  auto all = host.AllGather(msg);
  if (!all.ok()) return {Outcome::kFailed, "the ranks could not agree: " + all.status().message()};
  int first = -1, failing = 0;
  for (size_t r = 0; r < all->size(); ++r) {
    if ((*all)[r].empty()) continue;
    ++failing;
    if (first < 0) first = static_cast<int>(r);
  }
  if (first < 0) return {};
  const std::string& m = (*all)[static_cast<size_t>(first)];
  Verdict v;
  v.outcome = m[0] == 'W' ? Outcome::kWaived : m[0] == 'O' ? Outcome::kOom : Outcome::kFailed;
  v.reason = "rank " + std::to_string(first) + ": " + m.substr(1);
  if (failing > 1) v.reason += " (and " + std::to_string(failing - 1) + " more rank(s))";
  return v;
}

Result<EventId> CandidateRun::Event(size_t k) {
  while (events_.size() <= k) {
    PT_ASSIGN_OR_RETURN(EventId e, b_.CreateEvent());
    events_.push_back(e);
  }
  return events_[k];
}

int CandidateRun::GroupSizeOfPlan(GroupKind g) const {
  for (const Workload& w : rep_w_) {
    if (const Group* grp = w.FindGroup(g)) return static_cast<int>(grp->ranks.size());
  }
  return 1;
}

Status CandidateRun::Capabilities() const {
  std::set<backend::GemmPrecision> precisions;
  for (const WorkOp& op : rep_w_.front().ops) {
    if (op.type == OpType::kGemm) precisions.insert(op.precision);
  }
  for (backend::GemmPrecision p : precisions) PT_RETURN_IF_ERROR(b_.CheckGemm(p));
  for (const Spec& s : specs_) {
    PT_RETURN_IF_ERROR(b_.CheckCollective(s.op->collective, s.op->dtype, backend::ReduceOp::kSum));
  }
  return Status::Ok();
}

// Communicators and streams. Collective over the world.
Status CandidateRun::SetUp() {
  const int W = b_.world_size(), me = b_.rank();
  const int gpn = std::max(1, in_.job.cluster.gpus_per_node);
  if (full_) {
    auto comms = SplitPlanGroups(b_, c_, gpn);
    if (!comms.ok()) return comms.status();
    comms_ = *comms;
  } else {
    // Groups of the plan's size where the world is big enough, else of all
    // the processes there are; laid out like the plan's when they fit.
    for (GroupKind kind : GroupKindsOf(c_, gpn)) {
      const int p = GroupSizeOfPlan(kind);
      const int q = std::min(p, W);
      if (q < 2) continue;
      const bool compound = kind == GroupKind::kData && c_.gdata > 1 && c_.cp > 1;
      const int plan_stride = GroupStride(c_, kind);
      const int s = (q == p && !compound && plan_stride * q <= W) ? plan_stride : 1;
      const int block = q * s, full_blocks = W / block;
      int color = -1, key = 0;
      if (me < full_blocks * block) {
        color = (me / block) * s + me % s;
        key = (me % block) / s;
      }
      auto id = b_.SplitComm(backend::kWorldComm, color, key);
      if (!id.ok())
        return id.status().WithContext(std::string("splitting the ") + GroupKindName(kind) +
                                       " group");
      comms_[kind] = *id;
      // Does the first such group span hosts?
      bool inter = false;
      for (int i = 0; i < q; ++i) {
        inter = inter || b_.hosts()[static_cast<size_t>(i * s)] != b_.hosts()[0];
      }
      physical_inter_[kind] = inter;
    }
  }
  PT_ASSIGN_OR_RETURN(slots_, SlotsOf(b_, comms_));
  for (int r = 0; r < kNumStreamRoles; ++r) {
    PT_ASSIGN_OR_RETURN(streams_[static_cast<size_t>(r)], b_.CreateStream());
  }
  return Status::Ok();
}

Status CandidateRun::PassCompute(const Workload* w, const Scratch& s, RoleResult* out) {
  std::vector<int> ops;
  if (w) {
    for (size_t i = 0; i < w->ops.size(); ++i) {
      if (w->ops[i].type != OpType::kCollective) ops.push_back(static_cast<int>(i));
    }
  }
  Status local;
  std::vector<std::vector<double>> samples(ops.size());
  const StreamId st = streams_[static_cast<size_t>(StreamRole::kCompute)];
  for (size_t k = 0; w && k <= ops.size() && local.ok(); ++k) {
    auto e = Event(k);
    if (!e.ok()) local = e.status();
  }
  std::optional<Issuer> issuer;
  if (w) issuer.emplace(b_, *w, s, slots_);
  for (int it = 0; it < o_.warmup + o_.samples; ++it) {
    if (!host_.Barrier().ok()) break;
    if (!w || !local.ok()) continue;
    auto once = [&]() -> Status {
      PT_RETURN_IF_ERROR(b_.RecordEvent(events_[0], st));
      for (size_t k = 0; k < ops.size(); ++k) {
        PT_RETURN_IF_ERROR(issuer->Issue(ops[k], st));
        PT_RETURN_IF_ERROR(b_.RecordEvent(events_[k + 1], st));
      }
      PT_RETURN_IF_ERROR(b_.Synchronize(st));
      if (it < o_.warmup) return Status::Ok();
      for (size_t k = 0; k < ops.size(); ++k) {
        PT_ASSIGN_OR_RETURN(double t, b_.ElapsedSeconds(events_[k], events_[k + 1]));
        samples[k].push_back(t);
      }
      return Status::Ok();
    };
    local = once();
  }
  if (w && out) {
    out->plan_rank = w->plan_rank;
    out->op_s.assign(w->ops.size(), 0.0);
    for (size_t k = 0; k < ops.size(); ++k)
      out->op_s[static_cast<size_t>(ops[k])] = Median(samples[k]);
  }
  if (host_.broken()) return host_.broken_status();
  return local;
}

// Times every distinct collective alone on its group (module comment, phase 5).
Status CandidateRun::PassComm(const Scratch* s, const Workload* mine) {
  Status local;
  const StreamId st = streams_[static_cast<size_t>(StreamRole::kDataComm)];
  std::set<std::string> my_keys;
  if (mine) {
    for (const WorkOp& op : mine->ops) {
      if (op.type == OpType::kCollective) my_keys.insert(SpecKey(op));
    }
  }
  auto e0 = Event(0), e1 = Event(1);
  if (!e0.ok()) local = e0.status();
  if (!e1.ok()) local = e1.status();
  // Issue through a one-op workload view so the Issuer's buffer logic applies.
  for (Spec& spec : specs_) {
    auto slot = slots_.find(spec.group);
    const bool member = slot != slots_.end() && s != nullptr &&
                        (full_ ? my_keys.count(SpecKey(*spec.op)) > 0 : true);
    Workload one;
    one.precision = rep_w_.front().precision;
    one.ops.push_back(*spec.op);
    Issuer issuer(b_, one, *s, slots_);
    std::vector<double> t(static_cast<size_t>(o_.samples), 0.0);
    if (member && local.ok()) {
      for (int k = 0; k < o_.warmup && local.ok(); ++k) {
        local = issuer.Issue(0, st, 1);
        if (local.ok()) local = b_.Synchronize(st);
      }
      MaybeFatal(local);
    }
    bool host_ok = true;
    for (int k = 0; k < o_.samples; ++k) {
      if (!host_.Barrier().ok()) {
        host_ok = false;
        break;
      }
      if (!member || !local.ok()) continue;
      auto sample = [&]() -> Status {
        PT_RETURN_IF_ERROR(b_.RecordEvent(*e0, st));
        PT_RETURN_IF_ERROR(issuer.Issue(0, st, o_.comm_iters));
        PT_RETURN_IF_ERROR(b_.RecordEvent(*e1, st));
        PT_RETURN_IF_ERROR(b_.Synchronize(st));
        PT_ASSIGN_OR_RETURN(double e, b_.ElapsedSeconds(*e0, *e1));
        t[static_cast<size_t>(k)] = e / o_.comm_iters;
        return Status::Ok();
      };
      local = sample();
      MaybeFatal(local);
    }
    if (!host_ok || !host_.MaxReduce(&t).ok()) break;
    spec.per_call_s = Median(t);
  }
  if (host_.broken()) return host_.broken_status();
  return local;
}

// The overlapped slice (phase 6): layer and stage ops on their streams.
Status CandidateRun::PassSlice(const Workload* w, const Scratch& s, RoleResult* out) {
  Status local;
  std::vector<int> ops;
  std::vector<int> event_of;  // op index → events_ slot, -1 = none
  std::set<StreamRole> used = {StreamRole::kCompute};
  size_t next =
      2;  // events: 0 start, 1 end, then one per dependency target, then one per side stream
  if (w) {
    event_of.assign(w->ops.size(), -1);
    std::vector<bool> in(w->ops.size(), false);
    for (size_t i = 0; i < w->ops.size(); ++i) {
      const WorkOp& op = w->ops[i];
      if (op.scope == Scope::kStep || op.category == Category::kCommPp) continue;
      if (op.type == OpType::kCollective && !slots_.count(op.group)) continue;
      in[i] = true;
      ops.push_back(static_cast<int>(i));
      used.insert(op.stream);
    }
    for (int i : ops) {
      for (int d : w->ops[static_cast<size_t>(i)].after) {
        if (in[static_cast<size_t>(d)] &&
            w->ops[static_cast<size_t>(d)].stream != w->ops[static_cast<size_t>(i)].stream &&
            event_of[static_cast<size_t>(d)] < 0) {
          event_of[static_cast<size_t>(d)] = static_cast<int>(next++);
        }
      }
    }
    for (size_t k = 0; k < next + used.size() && local.ok(); ++k) {
      auto e = Event(k);
      if (!e.ok()) local = e.status();
    }
  }
  std::vector<StreamId> held;
  for (StreamRole r : used) held.push_back(streams_[static_cast<size_t>(r)]);
  const StreamId compute = streams_[static_cast<size_t>(StreamRole::kCompute)];
  std::optional<Issuer> issuer;
  if (w) issuer.emplace(b_, *w, s, slots_);
  std::vector<double> samples;
  const size_t side_base = next;
  for (int it = 0; it < o_.warmup + o_.samples; ++it) {
    if (!host_.Barrier().ok()) break;
    bool holding = false;
    if (w && local.ok()) {
      auto enqueue = [&]() -> Status {
        PT_RETURN_IF_ERROR(b_.HoldStreams(held));
        holding = true;
        PT_RETURN_IF_ERROR(b_.RecordEvent(events_[0], compute));
        for (StreamId sid : held) {
          if (sid != compute) PT_RETURN_IF_ERROR(b_.StreamWaitEvent(sid, events_[0]));
        }
        for (int i : ops) {
          const WorkOp& op = w->ops[static_cast<size_t>(i)];
          const StreamId sid = streams_[static_cast<size_t>(op.stream)];
          for (int d : op.after) {
            const int ev = event_of[static_cast<size_t>(d)];
            if (ev >= 0 && w->ops[static_cast<size_t>(d)].stream != op.stream) {
              PT_RETURN_IF_ERROR(b_.StreamWaitEvent(sid, events_[static_cast<size_t>(ev)]));
            }
          }
          PT_RETURN_IF_ERROR(issuer->Issue(i, sid));
          const int ev = event_of[static_cast<size_t>(i)];
          if (ev >= 0) PT_RETURN_IF_ERROR(b_.RecordEvent(events_[static_cast<size_t>(ev)], sid));
        }
        // Join: the compute stream waits for every side stream's last op.
        size_t k = side_base;
        for (StreamId sid : held) {
          if (sid == compute) continue;
          PT_RETURN_IF_ERROR(b_.RecordEvent(events_[k], sid));
          PT_RETURN_IF_ERROR(b_.StreamWaitEvent(compute, events_[k]));
          ++k;
        }
        return b_.RecordEvent(events_[1], compute);
      };
      local = enqueue();
      MaybeFatal(local);
    }
    const bool barrier_ok = host_.Barrier().ok();
    if (holding) {
      const Status rel = b_.ReleaseStreams();
      if (local.ok()) local = rel;
    }
    if (!barrier_ok) break;
    if (!w || !local.ok()) continue;
    auto finish = [&]() -> Status {
      for (StreamId sid : held) PT_RETURN_IF_ERROR(b_.Synchronize(sid));
      PT_ASSIGN_OR_RETURN(double t, b_.ElapsedSeconds(events_[0], events_[1]));
      if (it >= o_.warmup) samples.push_back(t);
      return Status::Ok();
    };
    local = finish();
    MaybeFatal(local);
  }
  if (w && out) out->slice_s = Median(samples);
  if (host_.broken()) return host_.broken_status();
  return local;
}

Status CandidateRun::PassMoe(const planner::Job& job, const planner::CostModel& cm,
                             CandidateReport* rep, std::optional<MoeLayerReport>* out) {
  const planner::ModelSpec& m = job.model;
  const int W = b_.world_size();
  // The plan's degrees where the processes hold whole expert groups, else the
  // largest divisor of ep (and etp, or 1) whose groups tile the processes.
  const int etp = W % c_.etp == 0 ? c_.etp : 1;
  int ep = 1;
  for (int d = c_.ep; d >= 1; --d) {
    if (c_.ep % d == 0 && W % (d * etp) == 0) {
      ep = d;
      break;
    }
  }
  // The tokens each rank routes, as the cost model counts them: the
  // micro-batch's sequence shard, split over the tensor ranks under sequence
  // parallelism (planner/cost/moe.cc).
  const int64_t seq_tokens = int64_t{c_.mbs} * job.training.seq_len;
  const int split = c_.cp * (c_.sp ? c_.gy : 1);
  auto not_run = [&](const std::string& why) {
    rep->modelled_parts.push_back("moe layer: not run (" + why + ")");
    return Status::Ok();
  };
  if (seq_tokens % split != 0) {
    return not_run("the micro-batch's " + std::to_string(seq_tokens) +
                   " tokens do not split over " + std::to_string(split) + " ranks");
  }
  const int64_t tokens = seq_tokens / split;
  Result<MoeLayerShape> shape = MoeLayerShapeOf(m, tokens, ep, etp);
  if (!shape.ok()) return not_run(shape.status().message());
  const backend::GemmPrecision precision = PrecisionsOf(job.training).gemm;
  Say("moe layer: ep " + std::to_string(ep) + " x etp " + std::to_string(etp) + ", " +
      std::to_string(tokens) + " tokens per rank, " + std::to_string(shape->local_experts) +
      " local expert(s), " + std::to_string(o_.samples) + " sample(s)");
  Status local;
  Result<MoeLayerComms> comms = SplitMoeComms(b_, ep, etp);
  if (!comms.ok()) {
    local = comms.status().WithContext("splitting the expert groups");
    MaybeFatal(local);
    return local;
  }
  Result<MoeLayerTiming> t = RunMoeLayer(b_, *comms, *shape, precision, o_.warmup, o_.samples);
  if (!t.ok()) {
    local = t.status().WithContext("the moe layer");
    MaybeFatal(local);
  }
  if (comms->etp != backend::kNoComm) (void)b_.DestroyComm(comms->etp);
  if (comms->ep != backend::kWorldComm) (void)b_.DestroyComm(comms->ep);
  if (!local.ok()) return local;

  // The cost model's figures for the degrees run: the forward dispatch and
  // combine (with the ETP gather and reduce-scatter), and the local experts'
  // FC1 and FC2 GEMMs at the rows each expert computes.
  planner::ParallelConfig run = c_;
  run.ep = ep;
  run.etp = etp;
  const planner::CostModel::ComputeTerms terms = cm.Compute(run);
  const double rows = static_cast<double>(shape->rows_per_expert);
  const double h = static_cast<double>(shape->hidden);
  const double experts_predicted = job.cluster.corrections.compute * shape->local_experts *
                                   (cm.GemmSeconds(rows, static_cast<double>(shape->fc1_out), h) +
                                    cm.GemmSeconds(rows, h, static_cast<double>(shape->ffn_local)));
  MoeLayerReport r;
  r.ep = ep;
  r.etp = etp;
  r.as_planned = ep == c_.ep && etp == c_.etp;
  r.tokens = tokens;
  r.local_experts = shape->local_experts;
  r.rows_per_expert = shape->rows_per_expert;
  r.a2a_bytes_per_rank = MoeA2aBytesPerRank(*shape, precision);
  r.a2a = {t->dispatch_s + t->combine_s, terms.moe_a2a_fwd, Source::kMeasured};
  r.experts = {t->experts_s, experts_predicted, Source::kMeasured};
  r.layer_measured_s = t->total_s;
  *out = r;
  rep->measured_parts.push_back(
      "moe layer: one forward (dispatch all-to-all" +
      std::string(etp > 1 ? ", ETP all-gather" : "") + ", the local experts' FC1/FC2 GEMMs" +
      std::string(etp > 1 ? ", ETP reduce-scatter" : "") +
      ", combine all-to-all) on expert groups of " + std::to_string(ep) + " x " +
      std::to_string(etp) + " folded over the processes (etp innermost)" +
      (r.as_planned ? ""
                    : ", fewer than the plan's ep " + std::to_string(c_.ep) + " x etp " +
                          std::to_string(c_.etp)));
  return Status::Ok();
}

void CandidateRun::TearDown() {
  for (const auto& [kind, id] : comms_) {
    if (id != backend::kNoComm) (void)b_.DestroyComm(id);
  }
  comms_.clear();
  slots_.clear();
}

CandidateReport CandidateRun::Run() {
  const auto t0 = std::chrono::steady_clock::now();
  const planner::Job job = JobFor(in_, index_);
  CandidateReport rep;
  rep.rank = in_.plan_ranks[index_];
  rep.config = c_;
  const planner::CostModel cm(job.model, job.training, job.cluster, job.gpus);
  const planner::Reason why = cm.CheckRules(c_);
  planner::Prediction pred;
  if (why == planner::Reason::kOk) pred = cm.Predict(c_);
  const planner::TimeBreakdown& pb = pred.breakdown;
  const double predicted[kNumTerms] = {pb.compute_s, pb.recompute_s, pb.comm_x_s,    pb.comm_y_s,
                                       pb.comm_z_s,  pb.comm_cp_s,   pb.comm_data_s, pb.comm_pp_s,
                                       pb.bubble_s,  pb.optimizer_s, pb.offload_s,   pb.host_s,
                                       pb.comm_ep_s};
  for (int i = 0; i < kNumTerms; ++i)
    rep.breakdown[static_cast<size_t>(i)].predicted_s = predicted[i];
  rep.predicted_s = pred.iteration_time_s;
  rep.memory_predicted_GiB = pred.memory.total_GiB;
  // The plan's own prediction beside the measured GPU's, also when the
  // candidate does not fit the measured GPU (it was feasible as planned).
  if (in_.plan_job) {
    planner::Job planned = *in_.plan_job;
    planned.training.framework = job.training.framework;
    const planner::CostModel pcm(planned.model, planned.training, planned.cluster, planned.gpus);
    if (pcm.CheckRules(c_) == planner::Reason::kOk) {
      rep.plan_predicted_s = pcm.Predict(c_).iteration_time_s;
    }
  }
  auto done = [&](Outcome o, const std::string& reason) {
    rep.status = o;
    rep.reason = reason;
    rep.slice_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return rep;
  };
  if (why != planner::Reason::kOk) {
    return done(Outcome::kFailed, std::string("the config breaks a rule: ") + cm.Explain(why, c_));
  }
  const int G = static_cast<int>(c_.world()), W = b_.world_size(), me = b_.rank();
  full_ = W >= G;
  reps_ = RepresentativeRanks(c_);
  for (int r : reps_) {
    auto w = BuildWorkload(job, c_, r, o_.workload);
    if (!w.ok()) return done(Outcome::kFailed, w.status().message());
    rep_w_.push_back(std::move(*w));
  }
  if (full_ && me < G) {
    auto w = BuildWorkload(job, c_, me, o_.workload);
    if (!w.ok()) return done(Outcome::kFailed, w.status().message());
    mine_ = std::move(*w);
  }
  // Distinct collectives, from the representatives (every rank of a stage has
  // its representative's ops), in a fixed order on every rank.
  for (const Workload& w : rep_w_) {
    for (const WorkOp& op : w.ops) {
      if (op.type != OpType::kCollective) continue;
      const std::string key = SpecKey(op);
      if (spec_index_.count(key)) continue;
      spec_index_[key] = 0;
      Spec s;
      s.group = op.group;
      s.op = &op;
      specs_.push_back(s);
    }
  }
  std::sort(specs_.begin(), specs_.end(),
            [](const Spec& a, const Spec& b) { return SpecKey(*a.op) < SpecKey(*b.op); });
  for (size_t i = 0; i < specs_.size(); ++i) spec_index_[SpecKey(*specs_[i].op)] = i;

  const int rounds = full_ ? 1 : static_cast<int>(CeilDiv(static_cast<int64_t>(reps_.size()), W));
  Say(std::to_string(G) + " plan rank(s) on " + std::to_string(W) + " process(es): " +
      (full_ ? "every rank runs its own workload"
             : "ranks " + JoinInts(reps_) + " (one per kind of pipeline stage) run in " +
                   std::to_string(rounds) + " round(s)"));

  Verdict v = Agree(host_, Capabilities(), /*waive=*/true);
  if (!v.ok()) return done(v.outcome, v.reason);
  v = Agree(host_, SetUp());
  if (!v.ok()) {
    TearDown();
    return done(v.outcome, v.reason);
  }
  auto size_of_plan = [&](GroupKind g) { return GroupSizeOfPlan(g); };
  for (int round = 0; round < rounds; ++round) {
    const Workload* role = nullptr;
    if (full_) {
      role = mine_ ? &*mine_ : nullptr;
    } else if (round * W + me < static_cast<int>(reps_.size())) {
      role = &rep_w_[static_cast<size_t>(round * W + me)];
    }
    Arena arena(b_);
    Scratch scratch;
    Status mem;
    if (role) {
      mem = arena.Prove(pred.memory, o_.touch_memory);
      int64_t compute = 0, comm = 0;
      auto size_of = [&](GroupKind g) {
        auto it = slots_.find(g);
        return it == slots_.end() ? size_of_plan(g) : it->second.size;
      };
      ScratchNeeds(*role, size_of, &compute, &comm);
      if (mem.ok()) {
        auto cbuf = arena.Carve(compute);
        if (!cbuf.ok())
          mem = cbuf.status();
        else
          scratch.compute = *cbuf;
      }
      if (mem.ok() && full_ && comm > 0) mem = arena.CarveComm(comm, &scratch);
      if (mem.ok()) {
        mem = b_.FillRandom(scratch.compute, role->precision.gemm_input,
                            0x5eed0000u + static_cast<uint64_t>(role->plan_rank));
      }
      allocated_GiB_ = std::max(allocated_GiB_, arena.proven_GiB());
      beyond_GiB_ = std::max(beyond_GiB_, arena.beyond_GiB());
    }
    Say("memory proof: " + Fixed(pred.memory.total_GiB, 2) + " GiB per GPU (the model's, most " +
        "loaded stage)" + (rounds > 1 ? ", round " + std::to_string(round + 1) : ""));
    v = Agree(host_, mem);
    if (!v.ok()) {
      TearDown();
      return done(v.outcome, v.reason);
    }
    RoleResult result;
    Say("compute: " + std::to_string(rep_w_.front().slice_layers) + " layer(s), " +
        std::to_string(o_.samples) + " sample(s)");
    v = Agree(host_, PassCompute(role, scratch, &result));
    if (!v.ok()) {
      TearDown();
      return done(v.outcome, v.reason);
    }
    if (full_) {
      Say("collectives: " + std::to_string(specs_.size()) + " distinct, on the plan's groups");
      v = Agree(host_, PassComm(&scratch, role));
      if (!v.ok()) {
        TearDown();
        return done(v.outcome, v.reason);
      }
      if (o_.overlapped_slice) {
        Say("overlapped slice on every plan rank");
        v = Agree(host_, PassSlice(role, scratch, &result));
        if (!v.ok()) {
          TearDown();
          return done(v.outcome, v.reason);
        }
      }
    }
    if (role) results_.push_back(std::move(result));
  }
  if (!full_ && !comms_.empty()) {  // the same answer on every rank
    Arena arena(b_);
    Scratch scratch;
    Status mem;
    int64_t comm = 0;
    for (const Spec& s : specs_) {
      auto it = slots_.find(s.group);
      if (it == slots_.end()) continue;
      const CallShape sh = ShapeOf(*s.op, it->second.size);
      comm = std::max({comm, sh.send_bytes, sh.recv_bytes});
    }
    if (comm > 0) mem = arena.CarveComm(comm, &scratch);
    v = Agree(host_, mem);
    if (!v.ok()) {
      TearDown();
      return done(v.outcome, v.reason);
    }
    Say("collectives: " + std::to_string(specs_.size()) + " distinct, on groups of up to " +
        std::to_string(W) + " process(es)");
    v = Agree(host_, PassComm(&scratch, nullptr));
    if (!v.ok()) {
      TearDown();
      return done(v.outcome, v.reason);
    }
  }
  if (job.model.is_moe()) {
    std::optional<MoeLayerReport> moe;
    v = Agree(host_, PassMoe(job, cm, &rep, &moe));
    if (!v.ok()) {
      TearDown();
      return done(v.outcome, v.reason);
    }
    rep.moe_layer = moe;
  }
  auto gathered = host_.AllGather(SerializeRoles(results_));
  TearDown();
  if (!gathered.ok())
    return done(Outcome::kFailed, "gathering the measurements: " + gathered.status().message());
  rep.memory_allocated_GiB = allocated_GiB_;
  rep.scratch_beyond_GiB = beyond_GiB_;
  if (me == 0) Finish(&rep, *gathered);
  return done(Outcome::kOk, "");
}

// Rank 0: the plan-group time of each distinct collective, the stages'
// figures, the extrapolation and the report's words.

}  // namespace paratune::executor::detail
