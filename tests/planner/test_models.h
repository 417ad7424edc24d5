// Model descriptions shared by the planner, executor and web tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "common/json.h"
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

// A model preset by name (a test failure, and an empty spec, when it is unknown).
inline ModelSpec Preset(const std::string& name) {
  Result<ModelSpec> m = ModelPreset(name);
  EXPECT_TRUE(m.ok()) << name << ": " << m.status().ToString();
  return m.ok() ? *m : ModelSpec{};
}

// `text` parsed as JSON (a test failure, and null, when it does not parse).
inline Json MustParse(const std::string& text) {
  Result<Json> j = ParseJson(text, "test");
  EXPECT_TRUE(j.ok()) << j.status().ToString();
  return j.ok() ? *j : Json();
}

}  // namespace paratune::planner::testing
