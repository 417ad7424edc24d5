// Megatron-Bridge's side of an emitted training script (--format
// megatron-bridge), restated from its source at NVIDIA-NeMo/Megatron-Bridge
// 067f987 and the Megatron-LM it pins (2a75ac1): every name the script uses
// must exist there (tests/frameworks/data/bridge_fields.txt, written from the
// source by scripts/fwcheck/bridge_fields.py, file and line per name), the
// values must pass the checks ConfigContainer.validate() and
// CommOverlapConfig.setup() make (file and line at each rule), and the
// parallel layout must be the plan's.
//
// These do not call paratune's emitter code: the rules here are written from
// Bridge's source, so a script Bridge would reject fails the test.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

namespace paratune::frameworks_test {

// The names of bridge_fields.txt by kind ("field", "mixed_precision",
// "recipe", "python").
inline const std::map<std::string, std::set<std::string>>& BridgeNames() {
  static const std::map<std::string, std::set<std::string>> names = [] {
    std::map<std::string, std::set<std::string>> n;
    std::ifstream in(std::string(PARATUNE_SOURCE_DIR) + "/tests/frameworks/data/bridge_fields.txt");
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream words(line);
      std::string kind, name;
      words >> kind >> name;
      n[kind].insert(name);
    }
    return n;
  }();
  return names;
}

// What an emitted script sets, read the way Python runs it: `cfg.A.B = V`
// assignments (the last one wins), GPTModelProvider(...) and
// CommOverlapConfig(...) keyword arguments, `_expect("f", planned, built)`
// checks, the imports and the environment.
struct BridgeScript {
  std::map<std::string, std::string> sets, provider, comm, expects, env;
  std::set<std::string> imports;  // "module.name"
  std::string mixed_precision;    // the Python expression assigned
  bool recipe_called = false;
  std::string Get(const std::string& k, const std::string& def = "") const {
    auto it = sets.find(k);
    return it == sets.end() ? def : it->second;
  }
  // An int field; None (unset) reads as `none`.
  int64_t Int(const std::string& k, int64_t none) const {
    const std::string v = Get(k, "None");
    return v == "None" ? none : std::stoll(v);
  }
  bool Bool(const std::string& k) const { return Get(k) == "True"; }
};

inline std::string Trim(const std::string& s) {
  const size_t a = s.find_first_not_of(' ');
  const size_t b = s.find_last_not_of(" ,");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

inline BridgeScript ParseBridgeScript(const std::string& text) {
  BridgeScript s;
  std::map<std::string, std::string>* kwargs = nullptr;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("from ", 0) == 0) {
      const size_t imp = line.find(" import ");
      s.imports.insert(line.substr(5, imp - 5) + "." + line.substr(imp + 8));
      continue;
    }
    const std::string t = Trim(line);
    if (kwargs) {
      if (t == ")") {
        kwargs = nullptr;
      } else if (const size_t eq = t.find('='); eq != std::string::npos) {
        (*kwargs)[t.substr(0, eq)] = t.substr(eq + 1);
      }
      continue;
    }
    if (t == "cfg.model = GPTModelProvider(") kwargs = &s.provider;
    if (t == "cfg.comm_overlap = CommOverlapConfig(") kwargs = &s.comm;
    if (kwargs) continue;
    if (t.rfind("cfg = ", 0) == 0 && t != "cfg = _pretrain_common()") s.recipe_called = true;
    if (t.rfind("_expect(\"", 0) == 0) {
      const size_t q = t.find('"', 9);
      const size_t c2 = t.find(',', q + 3);
      s.expects[t.substr(9, q - 9)] = Trim(t.substr(q + 3, c2 - q - 3));
      continue;
    }
    if (t.rfind("cfg.env_vars[\"", 0) == 0) {
      const size_t q = t.find('"', 14);
      const size_t v = t.find('"', q + 1);
      s.env[t.substr(14, q - 14)] = t.substr(v + 1, t.rfind('"') - v - 1);
      continue;
    }
    if (t.rfind("cfg.mixed_precision = ", 0) == 0) {
      s.mixed_precision = t.substr(22);
      continue;
    }
    const size_t eq = t.find(" = ");
    if (t.rfind("cfg.", 0) == 0 && eq != std::string::npos)
      s.sets[t.substr(4, eq - 4)] = t.substr(eq + 3);
  }
  return s;
}

// The plan facts a script is checked against (from the plans document).
struct BridgePlan {
  int64_t gpus = 0, tp = 1, pp = 1, vpp = 1, cp = 1, ep = 1, etp = 1, mbs = 1, gbs = 0, seq = 0;
  int64_t layers = 0, hidden = 0, heads = 0, vocab = 0;
  bool sp = false, moe = false, distributed_optimizer = false;
  std::string recompute;  // "none" | "selective" | "full"
  // With selective: the modules as the script's Python list ("[\"core_attn\"]").
  std::string recompute_modules;
  // The save schedule the plan was priced with (0: none priced).
  int64_t save_interval = 0;
  bool save_async = false;
};

inline std::string Unquote(const std::string& v) {
  return v.size() >= 2 && v.front() == '"' && v.back() == '"' ? v.substr(1, v.size() - 2) : v;
}

// "" when Bridge would take the script and it sets up the plan; else the
// name or rule it breaks.
inline std::string BridgeWouldReject(const std::string& text, const BridgePlan& p) {
  const BridgeScript s = ParseBridgeScript(text);
  const auto& names = BridgeNames();
  auto has = [&](const char* kind, const std::string& n) {
    return names.count(kind) && names.at(kind).count(n);
  };
  // Names: every field set, passed or checked exists in the pinned source.
  for (const auto& [k, v] : s.sets) {
    if (!has("field", k)) return "no field " + k;
  }
  for (const auto& [k, v] : s.provider) {
    if (!has("field", "model." + k)) return "no GPTModelProvider field " + k;
  }
  for (const auto& [k, v] : s.comm) {
    if (!has("field", "comm_overlap." + k)) return "no CommOverlapConfig field " + k;
  }
  for (const auto& [k, v] : s.expects) {
    if (!has("field", "model." + k)) return "checks a model field that does not exist: " + k;
  }
  for (const std::string& i : s.imports) {
    if (i.rfind("megatron.bridge.", 0) != 0) continue;
    if (!has("recipe", i) && !has("python", i)) return "imports what Bridge does not define: " + i;
  }
  if (s.mixed_precision.empty()) return "no mixed precision";
  if (s.mixed_precision.front() == '"' && !has("mixed_precision", Unquote(s.mixed_precision))) {
    return "no mixed-precision recipe " + s.mixed_precision;
  }
  if (s.provider.empty() == !s.recipe_called) return "neither a recipe nor a GPTModelProvider";

  // CheckpointConfig.finalize() under async_save (config.py:601-603: a save
  // path and the persistent worker, on by default at :516) and validate()'s
  // format rule (:1535-1539); the plan's schedule, saved and resumed.
  if (s.Bool("checkpoint.async_save")) {
    if (s.Get("checkpoint.save", "None") == "None") return "async_save without checkpoint.save";
    if (s.Get("checkpoint.use_persistent_ckpt_worker", "True") != "True")
      return "async_save without the persistent worker";
    const std::string f = Unquote(s.Get("checkpoint.ckpt_format", "\"torch_dist\""));
    if (f != "torch_dist" && f != "fsdp_dtensor") return "async_save in format " + f;
  }
  if (p.save_interval > 0) {
    if (s.Get("checkpoint.save", "None") == "None" || s.Get("checkpoint.load", "None") == "None")
      return "the plan's checkpoints are not saved and resumed";
    if (s.Int("checkpoint.save_interval", 0) != p.save_interval) return "save interval";
    if (s.Bool("checkpoint.async_save") != p.save_async) return "async save";
  }

  // ConfigContainer.validate() and get_data_parallel_size (training/config.py).
  const int64_t tp = s.Int("model.tensor_model_parallel_size", 1);
  const int64_t pp = s.Int("model.pipeline_model_parallel_size", 1);
  const int64_t cp = s.Int("model.context_parallel_size", 1);
  if (p.gpus % (tp * pp * cp) != 0) return "world % (tp·pp·cp) != 0 (config.py:1013-1027)";
  const int64_t dp = p.gpus / (tp * pp * cp);
  const int64_t mbs = s.Int("train.micro_batch_size", 0), gbs = s.Int("train.global_batch_size", 0);
  // The eval batch defaults to the training batch (config.py:1433-1442), then 1473-1478.
  if (mbs < 1 || gbs % (mbs * dp) != 0) return "global batch % (mbs·dp) != 0 (config.py:1473-1478)";
  const std::string seq = s.Get("model.seq_length");
  if (seq.empty() || seq != s.Get("dataset.seq_length"))
    return "model/dataset seq_length differ (config.py:1644-1648)";
  if (cp > 1 && std::stoll(seq) % (2 * cp) != 0) return "seq % 2cp != 0 (config.py:1574-1577)";
  if (Unquote(s.Get("model.cuda_graph_impl")) == "full_iteration") {
    if (s.Get("rerun_state_machine.check_for_nan_in_loss") != "False")
      return "full-iteration graph with the NaN check (config.py:1508-1513)";
    if (s.Get("model.cuda_graph_modules") != "[]")
      return "full_iteration needs an empty cuda_graph_modules (transformer_config.py:1052-1053 "
             "@2a75ac1)";
  }
  if (s.Get("model.pipeline_model_parallel_layout", "None") != "None" &&
      (s.Get("model.num_layers_in_first_pipeline_stage", "None") != "None" ||
       s.Get("model.num_layers_in_last_pipeline_stage", "None") != "None" ||
       s.Bool("model.account_for_embedding_in_pipeline_split") ||
       s.Bool("model.account_for_loss_in_pipeline_split"))) {
    return "a layout with other layout arguments (transformer_config.py:2001-2018 @2a75ac1)";
  }
  if (s.Bool("ddp.use_megatron_fsdp")) {
    if (s.Bool("dist.use_tp_pp_dp_mapping"))
      return "Megatron-FSDP with use_tp_pp_dp_mapping (config.py:1124)";
    if (s.env.count("CUDA_DEVICE_MAX_CONNECTIONS") &&
        s.env.at("CUDA_DEVICE_MAX_CONNECTIONS") == "1")
      return "Megatron-FSDP with CUDA_DEVICE_MAX_CONNECTIONS=1 (config.py:1110-1112)";
  }

  // CommOverlapConfig.setup (training/comm_overlap.py): a field left None
  // takes setup's default, which turns the overlap on whatever the plan says
  // (422-560 model, 562-585 optimizer); TP overlap is dropped silently
  // without TP >= 2 and sequence parallelism (440-447).
  for (const char* k :
       {"tp_comm_overlap", "overlap_p2p_comm", "batch_p2p_comm", "overlap_grad_reduce",
        "overlap_param_gather", "overlap_moe_expert_parallel_comm"}) {
    if (!s.comm.count(k) || s.comm.at(k) == "None")
      return std::string("CommOverlapConfig leaves ") + k + " to its default";
  }
  if (s.comm.at("overlap_grad_reduce") != s.Get("ddp.overlap_grad_reduce", "False") ||
      s.comm.at("overlap_param_gather") != s.Get("ddp.overlap_param_gather", "False")) {
    return "CommOverlapConfig and ddp disagree on the DP overlaps";
  }
  if (s.comm.at("tp_comm_overlap") == "True" && (tp < 2 || !s.Bool("model.sequence_parallel")))
    return "tp_comm_overlap without TP >= 2 and sequence parallel is dropped "
           "(comm_overlap.py:440-447)";
  if (s.comm.at("overlap_moe_expert_parallel_comm") == "True") {
    // comm_overlap.py:478-518.
    const std::string disp = Unquote(s.Get("model.moe_token_dispatcher_type"));
    if (s.Int("model.expert_model_parallel_size", 1) < 2)
      return "EP overlap with ep 1 (comm_overlap.py:479-481)";
    if (disp != "alltoall" && disp != "flex")
      return "EP overlap with dispatcher " + disp + " (comm_overlap.py:486-489)";
    if (pp > 1 && s.Get("model.virtual_pipeline_model_parallel_size", "None") == "None")
      return "EP overlap with pp > 1 and no vpp (comm_overlap.py:494-498)";
    if (Unquote(s.Get("model.recompute_granularity")) == "full" ||
        s.Get("model.recompute_method", "None") != "None" ||
        s.Get("model.recompute_num_layers", "None") != "None")
      return "EP overlap with full recompute (comm_overlap.py:499-507)";
    if (s.Get("model.moe_shared_expert_overlap") != "False")
      return "EP overlap without moe_shared_expert_overlap = False (comm_overlap.py:513-515)";
  }
  // A flex dispatcher without a backend falls back to all-to-all
  // (flex_dispatcher_backend.py:91-93).
  if (Unquote(s.Get("model.moe_token_dispatcher_type")) == "flex" &&
      s.Get("model.moe_flex_dispatcher_backend", "None") == "None") {
    return "flex dispatcher without a backend (flex_dispatcher_backend.py:91-93)";
  }

  // The plan's layout, batch and sharding.
  const int64_t vpp = s.Int("model.virtual_pipeline_model_parallel_size", 1);
  if (tp != p.tp || pp != p.pp || vpp != p.vpp || cp != p.cp || mbs != p.mbs || gbs != p.gbs ||
      std::stoll(seq) != p.seq) {
    return "the parallel layout or batch is not the plan's";
  }
  if (s.Bool("model.sequence_parallel") != (p.sp && p.tp > 1))
    return "sequence_parallel is not the plan's";
  if (p.moe && (s.Int("model.expert_model_parallel_size", 1) != p.ep ||
                s.Int("model.expert_tensor_parallel_size", 1) != p.etp)) {
    return "the expert layout is not the plan's";
  }
  const std::string rg = Unquote(s.Get("model.recompute_granularity", "None"));
  if ((p.recompute == "none" ? "None" : p.recompute) != rg) return "recompute is not the plan's";
  if (p.recompute == "selective" && s.Get("model.recompute_modules") != p.recompute_modules) {
    return "the recompute modules are not the plan's";
  }
  if (s.Bool("ddp.use_distributed_optimizer") != p.distributed_optimizer ||
      s.Bool("optimizer.use_distributed_optimizer") != p.distributed_optimizer) {
    return "the distributed optimizer is not the plan's";
  }
  // The model the plan was priced for: a recipe must be checked against it, a
  // provider must build it, and the vocabulary is the model's.
  const std::map<std::string, std::string>& shape = s.provider.empty() ? s.expects : s.provider;
  if (shape.count("num_layers") == 0 || std::stoll(shape.at("num_layers")) != p.layers ||
      std::stoll(shape.at("hidden_size")) != p.hidden ||
      std::stoll(shape.at("num_attention_heads")) != p.heads) {
    return "the model's shape is not checked or not the plan's";
  }
  if (s.Int("model.vocab_size", 0) != p.vocab ||
      s.Get("tokenizer.use_tokenizer_vocab_size") != "False")
    return "the vocabulary is not the model's (setup.py:741-781)";
  return "";
}

}  // namespace paratune::frameworks_test
