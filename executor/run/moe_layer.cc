#include "executor/run/moe_layer.h"

#include <algorithm>
#include <string>

#include "common/median.h"
#include "executor/run/owned_buffers.h"

namespace paratune::executor {

using backend::Backend;
using backend::Buffer;
using backend::DataType;
using backend::GemmPrecision;

Result<MoeLayerShape> MoeLayerShapeOf(const planner::ModelSpec& m, int64_t tokens, int ep,
                                      int etp) {
  if (!m.is_moe()) return Status::InvalidArgument("model: has no routed experts");
  if (tokens < 1) return Status::InvalidArgument("tokens: must be at least 1");
  if (ep < 1 || m.experts % ep != 0) {
    return Status::InvalidArgument("ep: " + std::to_string(ep) + " does not divide the " +
                                   std::to_string(m.experts) + " experts");
  }
  if (etp < 1 || m.moe_ffn_hidden % etp != 0) {
    return Status::InvalidArgument("etp: " + std::to_string(etp) +
                                   " does not divide the expert width " +
                                   std::to_string(m.moe_ffn_hidden));
  }
  const int64_t copies = tokens * m.top_k;
  if (copies % ep != 0 || (copies * ep * etp) % m.experts != 0) {
    return Status::InvalidArgument("tokens: " + std::to_string(tokens) + " tokens x top-" +
                                   std::to_string(m.top_k) + " do not spread evenly over ep " +
                                   std::to_string(ep) + " and " + std::to_string(m.experts) +
                                   " experts");
  }
  MoeLayerShape s;
  s.tokens = tokens;
  s.top_k = m.top_k;
  s.hidden = m.hidden;
  s.ep = ep;
  s.etp = etp;
  s.local_experts = m.experts / ep;
  s.rows_per_expert = copies * ep * etp / m.experts;
  s.ffn_local = m.moe_ffn_hidden / etp;
  s.fc1_out = (m.gated_ffn ? 2 : 1) * s.ffn_local;
  s.a2a_elements = copies * m.hidden;
  return s;
}

DataType MoeTokenType(GemmPrecision precision) {
  const bool wide = precision == GemmPrecision::kFp32 || precision == GemmPrecision::kTf32;
  return wide ? DataType::kFloat32 : DataType::kBFloat16;
}

int64_t MoeA2aBytesPerRank(const MoeLayerShape& s, GemmPrecision precision) {
  return s.a2a_elements * backend::DataTypeBytes(MoeTokenType(precision)) * (s.ep - 1) / s.ep;
}

Result<MoeLayerComms> SplitMoeComms(Backend& b, int ep, int etp) {
  const int r = b.rank();
  if (ep < 1 || etp < 1 || b.world_size() % (ep * etp) != 0) {
    return Status::InvalidArgument("ep x etp = " + std::to_string(ep * etp) +
                                   " does not divide the world of " +
                                   std::to_string(b.world_size()));
  }
  MoeLayerComms c;
  // Same expert-data index and same etp index: the EP group.
  const int ep_color = (r / (etp * ep)) * etp + r % etp;
  PT_ASSIGN_OR_RETURN(c.ep, b.SplitComm(backend::kWorldComm, ep_color, r));
  if (etp > 1) {
    PT_ASSIGN_OR_RETURN(c.etp, b.SplitComm(backend::kWorldComm, r / etp, r));
  }
  return c;
}

Result<MoeLayerTiming> RunMoeLayer(Backend& b, const MoeLayerComms& comms, const MoeLayerShape& s,
                                   GemmPrecision precision, int warmup, int samples) {
  if (samples < 1) return Status::InvalidArgument("samples: must be at least 1");
  const bool wide = precision == GemmPrecision::kFp32 || precision == GemmPrecision::kTf32;
  const DataType tok = MoeTokenType(precision);
  const int64_t tb = backend::DataTypeBytes(tok);
  const int64_t in_b = backend::GemmInputBytes(precision);
  const int64_t out_b = backend::GemmOutputBytes(precision);
  const int64_t n = s.a2a_elements;
  const int64_t gathered_n = n * s.etp;

  OwnedBuffers mem(b);
  PT_ASSIGN_OR_RETURN(Buffer send, mem.Get(n * tb));
  PT_ASSIGN_OR_RETURN(Buffer recv, mem.Get(n * tb));
  Buffer gathered = recv, expert_out, scattered;
  if (s.etp > 1) {
    PT_ASSIGN_OR_RETURN(gathered, mem.Get(gathered_n * tb));
  }
  PT_ASSIGN_OR_RETURN(expert_out, mem.Get(gathered_n * tb));
  scattered = expert_out;
  if (s.etp > 1) {
    PT_ASSIGN_OR_RETURN(scattered, mem.Get(n * tb));
  }
  PT_ASSIGN_OR_RETURN(Buffer combined, mem.Get(n * tb));
  const int64_t w1 = s.hidden * s.fc1_out * in_b, w2 = s.ffn_local * s.hidden * in_b;
  const int64_t mid = s.rows_per_expert * s.fc1_out * out_b;
  PT_ASSIGN_OR_RETURN(Buffer weights, mem.Get(s.local_experts * (w1 + w2)));
  PT_ASSIGN_OR_RETURN(Buffer inter, mem.Get(s.local_experts * mid));
  const DataType in_t = precision == GemmPrecision::kFp8    ? DataType::kFp8E4M3
                        : wide                              ? DataType::kFloat32
                        : precision == GemmPrecision::kFp16 ? DataType::kFloat16
                                                            : DataType::kBFloat16;
  // Random data: zeros flatter GPU clocks. Backends without data (the fake) say so.
  for (const auto& [buf, t] : {std::pair{send, tok}, std::pair{weights, in_t}}) {
    Status st = b.FillRandom(buf, t, 1234 + b.rank());
    if (!st.ok() && st.code() != StatusCode::kUnavailable) return st;
  }

  auto dispatch = [&]() -> Status {
    PT_RETURN_IF_ERROR(b.AllToAll(comms.ep, send, recv, n / s.ep, tok, backend::kDefaultStream));
    if (s.etp > 1) {
      PT_RETURN_IF_ERROR(b.AllGather(comms.etp, recv, gathered, n, tok, backend::kDefaultStream));
    }
    return Status::Ok();
  };
  auto experts = [&]() -> Status {
    const int64_t rows_bytes = s.rows_per_expert * s.hidden * tb;
    for (int e = 0; e < s.local_experts; ++e) {
      backend::GemmArgs fc1;
      fc1.m = s.rows_per_expert;
      fc1.n = s.fc1_out;
      fc1.k = s.hidden;
      fc1.precision = precision;
      fc1.a = backend::Slice(gathered, e * rows_bytes, rows_bytes);
      fc1.b = backend::Slice(weights, e * (w1 + w2), w1);
      fc1.c = backend::Slice(inter, e * mid, mid);
      PT_RETURN_IF_ERROR(b.Gemm(fc1));
      backend::GemmArgs fc2;
      fc2.m = s.rows_per_expert;
      fc2.n = s.hidden;
      fc2.k = s.ffn_local;
      fc2.precision = precision;
      fc2.a = fc1.c;
      fc2.b = backend::Slice(weights, e * (w1 + w2) + w1, w2);
      fc2.c = backend::Slice(expert_out, e * rows_bytes, rows_bytes);
      PT_RETURN_IF_ERROR(b.Gemm(fc2));
    }
    return Status::Ok();
  };
  auto combine = [&]() -> Status {
    if (s.etp > 1) {
      PT_RETURN_IF_ERROR(b.ReduceScatter(comms.etp, expert_out, scattered, n, tok,
                                         backend::ReduceOp::kSum, backend::kDefaultStream));
    }
    return b.AllToAll(comms.ep, scattered, combined, n / s.ep, tok, backend::kDefaultStream);
  };

  std::vector<backend::EventId> ev(4);
  for (auto& e : ev) {
    PT_ASSIGN_OR_RETURN(e, b.CreateEvent());
  }
  std::vector<double> d, x, c, t;
  for (int i = 0; i < warmup + samples; ++i) {
    PT_RETURN_IF_ERROR(b.HostBarrier());
    PT_RETURN_IF_ERROR(b.RecordEvent(ev[0], backend::kDefaultStream));
    PT_RETURN_IF_ERROR(dispatch());
    PT_RETURN_IF_ERROR(b.RecordEvent(ev[1], backend::kDefaultStream));
    PT_RETURN_IF_ERROR(experts());
    PT_RETURN_IF_ERROR(b.RecordEvent(ev[2], backend::kDefaultStream));
    PT_RETURN_IF_ERROR(combine());
    PT_RETURN_IF_ERROR(b.RecordEvent(ev[3], backend::kDefaultStream));
    PT_RETURN_IF_ERROR(b.Synchronize(backend::kDefaultStream));
    if (i < warmup) continue;
    PT_ASSIGN_OR_RETURN(double d_s, b.ElapsedSeconds(ev[0], ev[1]));
    PT_ASSIGN_OR_RETURN(double x_s, b.ElapsedSeconds(ev[1], ev[2]));
    PT_ASSIGN_OR_RETURN(double c_s, b.ElapsedSeconds(ev[2], ev[3]));
    PT_ASSIGN_OR_RETURN(double t_s, b.ElapsedSeconds(ev[0], ev[3]));
    d.push_back(d_s);
    x.push_back(x_s);
    c.push_back(c_s);
    t.push_back(t_s);
  }
  std::vector<double> medians = {Median(d), Median(x), Median(c), Median(t)};
  PT_RETURN_IF_ERROR(b.HostAllReduceMax(&medians));
  return MoeLayerTiming{medians[0], medians[1], medians[2], medians[3]};
}

}  // namespace paratune::executor
