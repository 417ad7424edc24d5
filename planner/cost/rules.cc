// The rules a configuration must satisfy before it is costed: divisibility,
// ZeRO combinations and what the training framework can express, with the
// stable names, fields and sentences the API reports for each violation.
#include <algorithm>
#include <iterator>
#include <sstream>

#include "common/enum_names.h"
#include "planner/cost_model.h"
#include "planner/moe.h"
#include "planner/moe_sharding.h"

namespace paratune::planner {

namespace {
// The stable name of each reason and the request field it points at, by
// value in the order of Reason's declaration (cost_model.h).
struct ReasonInfo {
  const char* name;
  const char* field;
};
constexpr ReasonInfo kReasons[] = {
    {"ok", ""},
    {"bad_degree", "/config"},
    {"world_mismatch", "/gpus"},
    {"heads_not_divisible", "/config/tp"},
    {"kv_heads_not_divisible", "/config/tp"},
    {"hidden_not_divisible", "/config/tp"},
    {"ffn_not_divisible", "/config/tp"},
    {"layers_not_divisible", "/config/pp"},
    {"batch_not_divisible", "/config/mbs"},
    {"micro_batches_vs_pp", "/config/vpp"},
    {"seq_not_divisible", "/config/cp"},
    {"z_shard_not_divisible", "/config/gz"},
    {"sp_needs_tensor", "/config/sp"},
    {"zero_conflict", "/config/zero"},
    {"out_of_memory", "/config"},
    {"framework_unsupported", "/training/framework"},
    {"out_of_host_memory", "/cluster/host_memory_GiB"},
    {"experts_not_divisible", "/config/ep"},
    {"expert_group_not_divisible", "/config/etp"},
};
static_assert(std::size(kReasons) == kNumReasons);
constexpr ReasonInfo kUnknownReason = {"unknown", ""};
}  // namespace

const char* ReasonName(Reason r) { return EnumLookup(r, kReasons, kUnknownReason).name; }

const char* ReasonField(Reason r) { return EnumLookup(r, kReasons, kUnknownReason).field; }

Reason CostModel::CheckRules(const ParallelConfig& c, bool framework_rules) const {
  const ModelSpec& m = model_;
  if (c.gx < 1 || c.gy < 1 || c.gz < 1 || c.gdata < 1 || c.pp < 1 || c.vpp < 1 || c.cp < 1 ||
      c.mbs < 1 || (c.vpp > 1 && c.pp < 2)) {
    return Reason::kBadDegree;
  }
  if (c.world() != gpus_) return Reason::kWorldMismatch;
  const bool ulysses = c.cp > 1 && c.cp_kind != CpKind::kRing;
  const int head_split = c.gy * (ulysses ? c.cp : 1);
  if (m.heads % head_split != 0) return Reason::kHeadsNotDivisible;
  if (m.kv_heads % c.gy != 0) return Reason::kKvHeadsNotDivisible;
  if (ulysses && m.kv_heads % head_split != 0 && head_split % m.kv_heads != 0) {
    return Reason::kKvHeadsNotDivisible;  // Ulysses replicates KV heads only when u is a multiple
  }
  if (m.hidden % c.gx != 0 || m.hidden % c.gy != 0) return Reason::kHiddenNotDivisible;
  if (m.ffn_hidden % c.gx != 0 || m.ffn_hidden % c.gy != 0) return Reason::kFfnNotDivisible;
  // The framework builds this pipeline layout (pipeline.h), with stages of
  // different sizes only where it runs them.
  if (!PipelineLayoutError(m.layers, c, fw_.support.pp_split).empty()) return Reason::kLayersNotDivisible;
  if (!fw_.support.uneven_pp && c.pp > 1 && !Stages(c).even) return Reason::kLayersNotDivisible;
  const int64_t per_step = int64_t{c.mbs} * c.gz * c.gdata;
  if (training_.global_batch % per_step != 0) return Reason::kBatchNotDivisible;
  const int64_t n_mb = training_.global_batch / per_step;
  if (c.vpp > 1 && n_mb % c.pp != 0) return Reason::kMicroBatchesVsPp;
  if (c.cp > 1) {
    const int need = c.cp_kind == CpKind::kRing ? 2 * c.cp : c.cp;
    if (training_.seq_len % need != 0) return Reason::kSeqNotDivisible;
    // FPDT: the sequence splits into whole chunks (DeepSpeed's FPDT_InputConstruct
    // asserts global_seq_len % ds_sequence_parallel_fpdt_chunk_size == 0).
    if (c.cp_kind == CpKind::kFpdt && training_.seq_len > training_.fpdt_chunk_tokens &&
        training_.seq_len % training_.fpdt_chunk_tokens != 0) {
      return Reason::kSeqNotDivisible;
    }
  }
  if (c.gz > 1) {
    const int64_t h = m.hidden, f = m.ffn_hidden * (m.gated_ffn ? 2 : 1);
    const int64_t t = c.tensor();
    for (int64_t kn : {h * m.qkv_out(), h * h, h * f, int64_t{m.ffn_hidden} * h}) {
      if ((kn / t) % c.gz != 0) return Reason::kZShardNotDivisible;
    }
  }
  if (c.sp && (c.gy < 2 || c.gx != 1)) return Reason::kSpNeedsTensor;
  if (const Reason moe = CheckMoeRules(c); moe != Reason::kOk) return moe;
  if (c.zero < 0 || c.zero > 3 || (c.distributed_optimizer && c.zero > 0) ||
      ((c.qwz || c.hpz || c.qgz) && c.zero != 3) || (c.offload_optimizer && c.zero < 1) ||
      (c.offload_param && c.zero != 3)) {
    return Reason::kZeroConflict;
  }
  if (!Supports(c)) return Reason::kFrameworkUnsupported;
  if (framework_rules && (BrokenRule(c) != nullptr || PlacementUnsupportedWhy(c)[0] != '\0')) {
    return Reason::kFrameworkUnsupported;
  }
  return Reason::kOk;
}

RuleJob RuleJobOf(const ModelSpec& m, const TrainingSpec& t) {
  return RuleJob{.heads = m.heads,
                 .kv_heads = m.kv_heads,
                 .tied_embeddings = m.tied_embeddings,
                 .gated_ffn = m.gated_ffn,
                 .linear_bias = m.linear_bias,
                 .moe = m.is_moe(),
                 .seq_len = t.seq_len,
                 .fpdt_chunk_tokens = t.fpdt_chunk_tokens};
}

const FrameworkRuleRef* CostModel::BrokenRule(const ParallelConfig& c, std::string* why) const {
  if (fw_.rules.empty()) return nullptr;
  RuleJob job = RuleJobOf(model_, training_);
  job.mds_model_gap = &mds_model_gap_;
  job.autoep_gap = &autoep_gap_;
  job.mcore_model_gap = &mcore_model_gap_;
  return planner::BrokenRule(fw_, job, c, why);
}

const char* CostModel::UnsupportedWhy(const ParallelConfig& c) const {
  const FrameworkSupport& f = fw_.support;
  if (c.gx > 1 && !f.axonn_xy) return "no AxoNN X dimension (gx > 1)";
  if (c.gy > 1 && !f.tp && !f.axonn_xy) return "no tensor parallelism (tp/gy > 1)";
  if (c.gy > 1 && c.gx == 1 && !c.sp && !f.tp_without_sp && f.tp) return "tensor parallelism only with sequence parallelism (sp)";
  if (c.sp && !f.sp) return "no sequence parallelism (sp)";
  if (c.gz > 1 && !f.shard_z) return "no sharded-parameter dimension (gz > 1)";
  if (c.pp > 1 && !f.pp) return "no pipeline parallelism (pp > 1)";
  if (c.vpp > 1 && !f.vpp) return "no interleaved pipeline (vpp > 1)";
  if (!f.pp_schedules[static_cast<int>(c.pp_schedule)])
    return "this pipeline schedule is not offered (pp_schedule)";
  // PyTorch's zero-bubble schedules refuse compiled stages (schedules.py,
  // ScheduleInterleavedZeroBubble.__init__): the frameworks offering them run
  // on torch.distributed.pipelining.
  if (c.pp_schedule != PpSchedule::k1F1B && training_.compile)
    return "zero-bubble pipeline schedules (pp_schedule) do not run under torch.compile";
  if (c.vpp > 1 && c.pp < f.vpp_min_pp) return "interleaved pipeline (vpp > 1) needs more pipeline stages (pp)";
  if (c.overlap_grad_reduce && c.pp > 1 && !f.overlap_grad_reduce_with_pp)
    return "overlap_grad_reduce only without pipeline parallelism (pp = 1)";
  if (c.cp > 1) {
    if (c.cp_kind == CpKind::kRing && !f.cp_ring) return "no ring context parallelism (cp_kind ring)";
    if (c.cp_kind == CpKind::kUlysses && !f.cp_ulysses) return "no Ulysses (cp_kind ulysses)";
    if (c.cp_kind == CpKind::kFpdt && !f.cp_fpdt) return "no FPDT (cp_kind fpdt)";
    if (!f.cp_with_tp_pp && (c.gy > 1 || c.pp > 1)) return "sequence parallelism (cp) without tp or pp only";
  }
  if (!f.zero[c.zero]) return "this ZeRO stage is not offered (zero)";
  if (c.distributed_optimizer && !f.distributed_optimizer) return "no Megatron distributed optimizer";
  if ((c.qwz || c.hpz || c.qgz) && !f.zeropp) return "no ZeRO++ (qwz, hpz, qgz)";
  if (c.offload_optimizer && !f.offload_optimizer)
    return "no optimizer offload (offload_optimizer)";
  if (c.offload_param && !f.offload_param) return "no parameter offload (offload_param)";
  if (c.pp > 1 && c.zero >= 2 && !f.pp_with_zero2) return "its pipeline engine refuses ZeRO-2/3";
  if (!f.recompute[static_cast<int>(c.recompute)]) return "this recompute granularity is not offered";
  if (c.recompute == Recompute::kSelective && c.recompute_modules != kDefaultRecomputeModules &&
      !f.recompute_modules) {
    return "selective recompute is not chosen per module here (recompute_modules: Megatron-Core)";
  }
  if (const char* why = RecomputeModulesWhy(c)) return why;
  // Megatron-Core transformer_config.py:1884-1899: CPU offloading only without
  // pipeline stages and without recompute, for fewer layers than the model has.
  if (c.offload_activation_layers > 0) {
    if (!f.offload_activations) return "no CPU activation offloading (offload_activation_layers)";
    if (c.pp > 1) return "CPU activation offloading (offload_activation_layers) needs pp = 1";
    if (c.recompute != Recompute::kNone)
      return "CPU activation offloading (offload_activation_layers) excludes recompute";
    if (c.offload_activation_layers >= model_.layers)
      return "offload_activation_layers must be below the model's layers";
  }
  if (c.cuda_graphs && !f.cuda_graphs) return "no full-iteration CUDA graphs (cuda_graphs)";
  if (const char* why = MegatronMoeCudaGraphGap(model_, c)) return why;
  const Framework fw = training_.framework;
  if (model_.is_moe() && (fw == Framework::kAxonn || fw == Framework::kFsdp)) {
    return "no mixture-of-experts layers";
  }
  if (ExpertShardingUnmodelled(model_, fw, c.zero) ||
      (model_.is_moe() && ((c.gz > 1 && fw != Framework::kTorchtitan) || c.offload_optimizer ||
                           c.offload_param))) {
    // The cost model prices expert weights replicated over the expert-data group
    // (states sharded by the distributed optimizer or DeepSpeed's ZeRO-1/2), or,
    // under torchtitan's FSDP2 (gz > 1), sharded over its efsdp group and
    // gathered per layer (ExpertFsdpShards); ZeRO-3's, Megatron-FSDP's (zero 2
    // and 3) and offload's handling of experts is not modelled.
    return "ZeRO-3, Megatron-FSDP, FSDP1/AxoNN sharding or offload of a mixture-of-experts "
           "model (not modelled)";
  }
  if (c.ep > 1 || c.etp > 1) {
    // torchtitan folds experts into its mesh with ETP 1 or ETP = TP
    // (parallel_dims.py); DeepSpeed-MoE has no expert tensor parallelism.
    if (fw == Framework::kTorchtitan && c.etp != 1 && c.etp != c.gy)
      return "etp other than 1 or tp";
    if ((fw == Framework::kDeepSpeed || fw == Framework::kMegatronDeepSpeed) && c.etp != 1) {
      return "no expert tensor parallelism (etp)";
    }
  }
  if (c.moe_dispatcher != MoeDispatcher::kAllToAll && fw != Framework::kMegatron) {
    return "only the all-to-all dispatcher (moe_dispatcher)";
  }
  if (c.moe_a2a_overlap) {
    // Megatron-Core transformer_config.py:3002-3046 @d98e8a64: EP > 1, an
    // alltoall/flex dispatcher, no full recompute, vpp when pp > 1.
    if (fw != Framework::kMegatron) return "no expert-parallel all-to-all overlap";
    if (c.ep < 2 || c.moe_dispatcher == MoeDispatcher::kAllGather ||
        c.recompute == Recompute::kFull || (c.pp > 1 && c.vpp < 2)) {
      return "moe_a2a_overlap needs ep > 1, an alltoall/deepep/hybridep dispatcher, no full "
             "recompute and vpp > 1 with pp > 1";
    }
    // transformer_config.py:3020-3032: nor the MoE layer's own recompute.
    if (c.recompute == Recompute::kSelective && (c.recompute_modules & kRcMoe)) {
      return "moe_a2a_overlap excludes recomputing the MoE layer (recompute_modules moe)";
    }
  }
  return "";
}

const char* CostModel::RecomputeModulesModelGap(const ModelSpec& m, uint8_t modules) {
  // NVIDIA/Megatron-LM@d98e8a6 megatron/core/transformer/transformer_config.py.
  if ((modules & kRcMlaUpProj) && !m.is_mla()) {
    return "recompute_modules mla_up_proj needs multi-latent attention (transformer_config.py:1969-1973)";
  }
  if ((modules & (kRcMoeAct | kRcMoe | kRcSharedExperts)) && !m.is_moe()) {
    return "recompute_modules moe_act, moe and shared_experts name modules of MoE layers; this "
           "model has none";
  }
  if ((modules & kRcSharedExperts) && m.shared_ffn_hidden == 0) {
    return "recompute_modules shared_experts: this model has no shared experts";
  }
  if ((modules & kRcMlp) && m.dense_layer_count() == 0) {
    return "recompute_modules mlp recomputes dense MLPs; every layer of this model is MoE";
  }
  return nullptr;
}

const char* CostModel::RecomputeModulesWhy(const ParallelConfig& c) const {
  if (c.recompute != Recompute::kSelective || c.recompute_modules == kDefaultRecomputeModules) {
    return nullptr;
  }
  if (const char* why = RecomputeModulesModelGap(model_, c.recompute_modules)) return why;
  // NVIDIA/Megatron-LM@d98e8a6 megatron/core/transformer/transformer_config.py
  // :2000-2012: FP8 with delayed scaling cannot recompute moe_act or layernorm.
  if ((c.recompute_modules & (kRcMoeAct | kRcLayerNorm)) &&
      training_.precision == topology::Precision::kFp8 &&
      training_.recipe == topology::Recipe::kFp8Delayed) {
    return "recompute_modules moe_act and layernorm do not run with FP8 delayed scaling "
           "(transformer_config.py:2000-2012)";
  }
  return nullptr;
}

const char* CostModel::PlacementUnsupportedWhy(const ParallelConfig& c) const {
  // Megatron-Core orders the expert ranks as the dense ones with ep in place of
  // cp: tp-ep-dp-pp, or tp-ep-pp-dp under --use-tp-pp-dp-mapping, which with
  // PP > 1 needs the expert data-parallel size to equal DP
  // (parallel_state.py:898-902 @d98e8a6).
  if (training_.framework == Framework::kMegatron && (model_.is_moe() || c.ep > 1) && c.pp > 1 &&
      c.gdata > 1) {
    const auto& o = c.placement.order;
    const auto pp_at = std::find(o.begin(), o.end(), Dim::kPp);
    const auto data_at = std::find(o.begin(), o.end(), Dim::kData);
    if (pp_at < data_at && c.expert_data() != c.gdata) {
      return "the tp-pp-dp rank order (--use-tp-pp-dp-mapping) with pp > 1 needs the expert "
             "data-parallel size to equal dp";
    }
  }
  return "";
}

bool CostModel::Supports(const ParallelConfig& c) const { return UnsupportedWhy(c)[0] == '\0'; }

std::string CostModel::Explain(Reason r, const ParallelConfig& c) const {
  std::ostringstream os;
  const ModelSpec& m = model_;
  const int64_t per_step = int64_t{c.mbs} * c.gz * c.gdata;
  switch (r) {
    case Reason::kOk: return "feasible";
    case Reason::kBadDegree:
      return "every degree must be >= 1, and vpp > 1 needs pp > 1";
    case Reason::kWorldMismatch:
      os << "the product of degrees gx·gy·gz·gdata·pp·cp = " << c.world() << " must equal gpus = "
         << gpus_;
      break;
    case Reason::kHeadsNotDivisible:
      os << "attention heads (" << m.heads << ") must be divisible by the tensor degree gy/tp ("
         << c.gy << ")" << (c.cp > 1 && c.cp_kind != CpKind::kRing ? " times the Ulysses degree cp" : "");
      break;
    case Reason::kKvHeadsNotDivisible:
      os << "key/value heads (" << m.kv_heads << ") must be divisible by the tensor degree gy/tp ("
         << c.gy << ")";
      break;
    case Reason::kHiddenNotDivisible:
      os << "hidden size (" << m.hidden << ") must be divisible by gx (" << c.gx << ") and gy/tp ("
         << c.gy << ")";
      break;
    case Reason::kFfnNotDivisible:
      os << "ffn_hidden (" << m.ffn_hidden << ") must be divisible by gx (" << c.gx
         << ") and gy/tp (" << c.gy << ")";
      break;
    case Reason::kLayersNotDivisible: {
      const std::string layout = PipelineLayoutError(m.layers, c, fw_.support.pp_split);
      if (!layout.empty()) {
        os << FrameworkName(training_.framework) << " does not build this pipeline layout: " << layout;
      } else {
        os << FrameworkName(training_.framework) << " runs only pipeline stages of equal layer counts; "
           << "these hold different ones";
      }
      break;
    }
    case Reason::kBatchNotDivisible:
      os << "global_batch (" << training_.global_batch << ") must be divisible by mbs·gz·gdata ("
         << per_step << ")";
      break;
    case Reason::kMicroBatchesVsPp:
      os << "the interleaved schedule needs the micro-batch count ("
         << (per_step > 0 ? training_.global_batch / per_step : 0) << ") to be a multiple of pp ("
         << c.pp << ")";
      break;
    case Reason::kSeqNotDivisible:
      os << "seq_len (" << training_.seq_len << ") must be divisible by "
         << (c.cp_kind == CpKind::kRing ? "2·cp (causal load balance)" : "cp") << " = "
         << (c.cp_kind == CpKind::kRing ? 2 * c.cp : c.cp);
      if (c.cp_kind == CpKind::kFpdt && training_.seq_len > training_.fpdt_chunk_tokens) {
        os << ", and by FPDT's chunk (fpdt_chunk_tokens = " << training_.fpdt_chunk_tokens << ")";
      }
      break;
    case Reason::kZShardNotDivisible:
      os << "every weight block k·n/(gx·gy) must split evenly over gz (" << c.gz << ")";
      break;
    case Reason::kExpertsNotDivisible:
      if (!m.is_moe()) {
        os << "ep and etp need a mixture-of-experts model (" << m.name << " has no experts)";
      } else {
        os << "experts (" << m.experts << ") must be divisible by ep (" << c.ep
           << ") and moe_ffn_hidden (" << m.moe_ffn_hidden << ") by etp (" << c.etp << ")";
      }
      break;
    case Reason::kExpertGroupNotDivisible:
      os << "the ranks of a pipeline stage (" << c.stage_ranks()
         << ") must be divisible by ep·etp (" << int64_t{c.ep} * c.etp
         << "): Megatron-Core folds the experts into etp × ep × expert-data";
      break;
    case Reason::kSpNeedsTensor:
      return "sequence parallelism (sp) needs Megatron tensor parallelism: tp/gy > 1 and gx = 1";
    case Reason::kZeroConflict:
      return "zero must be 0-3; distributed_optimizer excludes zero > 0; qwz/hpz/qgz need zero = "
             "3; "
             "offload_optimizer needs zero >= 1 and offload_param zero = 3";
    case Reason::kOutOfMemory: return "needs more memory per GPU than is usable";
    case Reason::kOutOfHostMemory:
      if (!(cluster_.host_memory_GiB > 0 && cluster_.host_memory_GBps > 0)) {
        return "offloads to host memory, but the cluster states no host_memory_GiB / "
               "host_memory_GBps";
      }
      os << "needs more host memory per node than is usable ("
         << cluster_.host_memory_GiB * (1.0 - training_.headroom) << " GiB)";
      break;
    case Reason::kFrameworkUnsupported: {
      os << FrameworkName(training_.framework) << " cannot run this configuration: ";
      std::string why;
      if (UnsupportedWhy(c)[0] == '\0') {
        if (const char* order = PlacementUnsupportedWhy(c); order[0] != '\0') {
          os << order;
          break;
        }
        if (const FrameworkRuleRef* rule = BrokenRule(c, &why)) {
          os << why << " (" << rule->source << ")";
          break;
        }
      }
      os << UnsupportedWhy(c);
      break;
    }
  }
  return os.str();
}

}  // namespace paratune::planner
