// The World a framework's restated rules check an emitted file against,
// taken from the planner's Job (shared by the emit and start-up tests).
#pragma once

#include "framework_rules.h"
#include "planner/request.h"

namespace paratune::frameworks_test {

inline World WorldOf(const planner::Job& j) {
  return World{.gpus = j.gpus,
               .layers = j.model.layers,
               .hidden = j.model.hidden,
               .heads = j.model.heads,
               .kv_heads = j.model.kv_heads,
               .ffn = j.model.ffn_hidden,
               .vocab = j.model.vocab,
               .seq = j.training.seq_len,
               .gbs = j.training.global_batch,
               .tied_embeddings = j.model.tied_embeddings,
               .gated_ffn = j.model.gated_ffn,
               .linear_bias = j.model.linear_bias,
               .experts = j.model.experts,
               .sliding_window = j.model.sliding_window,
               .sliding_layers = j.model.sliding_layers,
               .hf_model_type = {},
               .rope_theta = j.model.rope_theta,
               .rope_llama3_scaling = j.model.rope_llama3_scaling,
               .norm_eps = j.model.norm_eps,
               .qk_norm = j.model.qk_norm,
               .attention_sinks = j.model.attention_sinks,
               .swiglu_limit = j.model.swiglu_limit,
               // Compute capability by GPU generation (A100 8.0, H100/H200 9.0).
               .gpu_arch_major = j.cluster.gpu.name.rfind("a100", 0) == 0 ? 8 : 9};
}

}  // namespace paratune::frameworks_test
