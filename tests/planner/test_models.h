// Model descriptions shared by the planner, executor and web tests.
#pragma once

#include "planner/model.h"

namespace paratune::planner::testing {

// A GPT-style model: LayerNorm, GeLU FFN with f = 4h, multi-head attention,
// biases, tied embeddings.
inline ModelSpec GptLike(int layers, int hidden, int heads, int vocab, bool dropout = true,
                         int max_seq_len = 2048) {
  ModelSpec m;
  m.name = "gpt-test";
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = heads;
  m.ffn_hidden = 4 * hidden;
  m.vocab = vocab;
  m.dropout = dropout;
  m.linear_bias = true;
  m.tied_embeddings = true;
  m.norm = "layernorm";
  m.max_seq_len = max_seq_len;
  return m;
}

}  // namespace paratune::planner::testing
