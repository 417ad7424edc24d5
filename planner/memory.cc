#include "planner/memory.h"

#include <bit>

namespace paratune::planner {

ModelStates ModelStateBytes(double psi, int data_degree, int zero, bool distributed_optimizer,
                            double param_bytes, double grad_bytes) {
  ModelStates m;
  const double d = data_degree;
  double opt_b = 8.0 + (param_bytes < 4.0 ? 4.0 : 0.0);
  if (distributed_optimizer && grad_bytes < 4.0) opt_b += 4.0;
  m.params_bytes = psi * param_bytes;
  m.grads_bytes = psi * grad_bytes;
  m.optimizer_bytes = psi * opt_b;
  if (distributed_optimizer && grad_bytes < 4.0) m.step_bytes = psi * 4.0;
  if (zero >= 1 || distributed_optimizer) {
    m.optimizer_bytes /= d;
    m.step_bytes /= d;
  }
  if (zero >= 2) m.grads_bytes /= d;
  if (zero >= 3) m.params_bytes /= d;
  return m;
}

OffloadedStates OffloadStateBytes(const ModelStates& states, double psi, int data_degree, int zero,
                                  bool offload_optimizer, bool offload_param) {
  OffloadedStates o;
  o.gpu = states;
  const double partition = psi / data_degree;
  if (offload_optimizer && zero >= 1) {
    o.host_bytes += states.optimizer_bytes + 4.0 * partition;
    o.gpu.optimizer_bytes = 0;
    o.gpu.step_bytes = 0;
    // ZeRO-2/3 copy each reduced bucket to the host as it fills; ZeRO-1 keeps
    // the full gradients in param.grad until the accumulation boundary.
    if (zero >= 2) o.gpu.grads_bytes = 0;
  }
  if (offload_param && zero == 3) {
    o.host_bytes += states.params_bytes;
    o.gpu.params_bytes = 0;
  }
  return o;
}

double CpuAdamSeconds(double params_per_node, double host_memory_GBps) {
  return params_per_node * kCpuAdamBytesPerParam /
         (host_memory_GBps * 1e9 * kCpuAdamDramEfficiency);
}

namespace {

struct ActParts {
  double rep = 0, shard = 0, scores = 0, input = 0;
  double mlp = 0;     // the MLP block's share of rep + shard
  double qkv = 0;     // the attention kernel's Q, K, V (part of shard)
  double ln_out = 0;  // one norm output, as the next linear keeps it (part of rep)
};

// Per-token widths of the attention's saved tensors.
struct AttnWidths {
  double q = 0, k = 0, v = 0, o = 0;
  double latents = 0;  // MLA: the normed latents, replicated over the tensor group
};
AttnWidths Widths(const ModelSpec& m) {
  AttnWidths w;
  if (m.is_mla()) {
    const double a = m.heads;
    w.q = w.k = a * (m.qk_nope_head_dim + m.qk_rope_head_dim);
    w.v = w.o = a * m.v_head_dim;
    w.latents = 2.0 * m.q_lora_rank + 2.0 * m.kv_lora_rank + m.qk_rope_head_dim;
  } else {
    w.q = w.o = static_cast<double>(m.q_out());
    w.k = w.v = static_cast<double>(m.kv_heads) * m.head_dim();
  }
  return w;
}

ActParts Parts(const ModelSpec& m, bool flash, double e, int seq_len, const ParallelConfig& c,
               bool fp8_inputs) {
  const double h = m.hidden, a = m.heads, f = m.ffn_hidden;
  const double s = seq_len, b = c.mbs, gx = c.gx, gy = c.gy;
  const bool ulysses = c.cp > 1 && c.cp_kind != CpKind::kRing;
  const double T = b * s / c.cp;
  const double sp = c.sp ? gy : 1.0;
  ActParts p;
  // Replicated over Y: two norm inputs, the QKV and FC1 inputs, two dropout masks.
  // With FP8 the QKV and FC1 inputs (here) and the projection and FC2 inputs
  // (below) are kept as 1-byte FP8 copies.
  const double in_b = fp8_inputs ? 1.0 : e;
  p.rep = (2.0 * e * T * h + 2.0 * in_b * T * h + (m.dropout ? 2.0 * T * h : 0.0)) / gx / sp;
  // Split over Y: Q, K, V (GQA-sized), the attention output (proj input), and the
  // FFN's saved tensors (GeLU: its input and output; SwiGLU: gate, up, product).
  const AttnWidths w = Widths(m);
  p.qkv = e * T * (w.q + w.k + w.v) / gy;
  p.shard = p.qkv + (e * T * (m.gated_ffn ? 2.0 : 1.0) * f + in_b * T * (w.o + f)) / gy +
            e * T * w.latents;
  p.ln_out = in_b * T * h / gx / sp;
  // The MLP's own part of rep and shard: the FC1 input, the FC1 output(s), the FC2 input.
  p.mlp = in_b * T * h / gx / sp + (e * T * (m.gated_ffn ? 2.0 : 1.0) * f + in_b * T * f) / gy;
  const double heads_loc = a / gy / (ulysses ? c.cp : 1);
  const double s_q = ulysses ? s : s / c.cp;
  if (flash) {
    p.scores = 4.0 * b * heads_loc * s_q;  // fp32 log-sum-exp per query row
  } else {
    // softmax output (e), dropout mask (1) and dropout output (e) per score.
    p.scores = b * heads_loc * s_q * s * (e + (m.dropout ? 1.0 + e : 0.0));
  }
  p.input = e * T * h / gx / sp;
  return p;
}

}  // namespace

double LayerActivationBytesNoRecompute(const ModelSpec& m, bool flash, double e, int seq_len,
                                       const ParallelConfig& c, bool fp8_inputs) {
  ActParts p = Parts(m, flash, e, seq_len, c, fp8_inputs);
  return p.rep + p.shard + p.scores;
}

double LayerActivationBytes(const ModelSpec& m, bool flash, double e, int seq_len,
                            const ParallelConfig& c, bool fp8_inputs) {
  ActParts p = Parts(m, flash, e, seq_len, c, fp8_inputs);
  switch (c.recompute) {
    case Recompute::kNone: return p.rep + p.shard + p.scores;
    case Recompute::kSelective: return p.rep + p.shard;
    case Recompute::kFull: return p.input;
  }
  return p.rep + p.shard + p.scores;
}

std::array<double, kNumRecomputeModules> DenseRecomputeSavings(const ModelSpec& m, bool flash, double e,
                                                               int seq_len, const ParallelConfig& c,
                                                               bool fp8_inputs) {
  const ActParts p = Parts(m, flash, e, seq_len, c, fp8_inputs);
  std::array<double, kNumRecomputeModules> saved{};
  auto at = [&](RecomputeModule mod) -> double& { return saved[std::countr_zero(unsigned{mod})]; };
  at(kRcCoreAttn) = p.scores;
  at(kRcLayerNorm) = m.is_mla() ? p.ln_out : 0.0;
  at(kRcMlp) = p.mlp;
  at(kRcMlaUpProj) = m.is_mla() ? p.qkv : 0.0;
  return saved;
}

double DenseMlpActivationBytes(const ModelSpec& m, double e, int seq_len, const ParallelConfig& c,
                               bool fp8_inputs) {
  return Parts(m, /*flash=*/true, e, seq_len, c, fp8_inputs).mlp;
}

double PerOpSacActivationBytes(const ModelSpec& m, double e, int seq_len, const ParallelConfig& c) {
  const double t = c.tensor();
  const double T = static_cast<double>(c.mbs) * seq_len / c.cp;
  const double h = m.hidden;
  const double q = static_cast<double>(m.q_out());
  const double kv = static_cast<double>(m.kv_heads) * m.head_dim();
  const double f = m.ffn_hidden;
  // The block's matmuls in forward order: output width and whether the
  // output is a row-parallel partial sum (full width under tensor parallelism).
  struct Mm {
    double width;
    bool row_parallel;
  };
  const Mm gated[] = {{q, false}, {kv, false}, {kv, false}, {h, true}, {f, false}, {f, false}, {h, true}};
  const Mm gelu[] = {{q, false}, {kv, false}, {kv, false}, {h, true}, {f, false}, {h, true}};
  const Mm* mms = m.gated_ffn ? gated : gelu;
  const int n = m.gated_ffn ? 7 : 6;
  const bool sp = c.sp && t > 1;
  double bytes = e * T * h / (sp ? t : 1.0);  // the checkpoint's input
  for (int i = 0; i < n; ++i) {
    if (i % 2 == 1) continue;  // every second mm is recomputed
    bytes += e * T * (mms[i].row_parallel ? mms[i].width : mms[i].width / t);
  }
  // The attention kernel's output and its fp32 log-sum-exp per query row.
  bytes += e * T * q / t + 4.0 * c.mbs * (m.heads / t) * seq_len / c.cp;
  if (sp) bytes += 2.0 * e * T * h / t;  // the two saved reduce-scatter outputs
  return bytes;
}

}  // namespace paratune::planner
