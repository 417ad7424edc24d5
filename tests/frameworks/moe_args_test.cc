// The MoE launch arguments (frameworks/moe_args.h) for the published MoE
// architectures, and the start-up rules each framework applies to them, each
// mirrored from its source at the commits docs/frameworks.md lists.
#include "frameworks/moe_args.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "tests/planner/test_models.h"

namespace paratune::planner {
namespace {

using testing::Preset;

bool Has(const std::vector<std::string>& args, const std::string& a) {
  return std::find(args.begin(), args.end(), a) != args.end();
}

// Checks that `r` is a refusal whose message names `why`: the rule broken, or
// the framework's source lines that hold it.
template <typename T>
void ExpectRefused(const Result<T>& r, const std::string& why) {
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
}

TEST(MoeArgs, DeepSeekV3MegatronArgumentsAreThePublishedArchitecture) {
  // DeepSeek-V3 config.json: 256 routed experts of 2048, 1 shared of 2048, top-8,
  // sigmoid scores, the first 3 of 61 layers dense, MLA q_lora 1536 / kv_lora 512,
  // qk nope 128 + rope 64, v 128, one MTP module. EP 64 as the paper trained it.
  const MoeLaunch l{.ep = 64, .etp = 1, .world = 2048, .pp = 16};
  auto a = MegatronMoeArgs(Preset("deepseek-v3"), l);
  ASSERT_TRUE(a.ok()) << a.status().message();
  for (const char* want :
       {"--num-experts 256", "--moe-ffn-hidden-size 2048", "--moe-router-topk 8",
        "--moe-shared-expert-intermediate-size 2048",
        // The form of Megatron's DeepSeek-V3 proxy test, model_config.yaml:98
        // ("([0]*3+[1]*11)" for its 14 layers).
        "--moe-layer-freq '([0]*3+[1]*58)'", "--moe-router-score-function sigmoid",
        "--mtp-num-layers 1", "--multi-latent-attention", "--qk-layernorm", "--q-lora-rank 1536",
        "--kv-lora-rank 512", "--qk-head-dim 128", "--qk-pos-emb-head-dim 64", "--v-head-dim 128",
        "--moe-grouped-gemm", "--moe-permute-fusion", "--moe-token-dispatcher-type alltoall",
        "--expert-model-parallel-size 64", "--expert-tensor-parallel-size 1"}) {
    EXPECT_TRUE(Has(*a, want)) << want;
  }
}

TEST(MoeArgs, InterleavedAndDenseFirstLayerPatterns) {
  const MoeLaunch l{.ep = 8, .world = 128};
  // Llama 4 Maverick: every second of 48 layers MoE, as Megatron's own example
  // writes it (Llama-4-Maverick-17B-128E-Instruct.sh:29: "([0,1]*24)").
  auto maverick = MegatronMoeArgs(Preset("llama4-maverick"), l);
  ASSERT_TRUE(maverick.ok()) << maverick.status().message();
  EXPECT_TRUE(Has(*maverick, "--moe-layer-freq '([0,1]*24)'"));
  // DeepSeek-V2-Lite: the first of 27 layers dense (Megatron's example writes
  // "([0]+[1]*26)", DeepSeek-V2-Lite.sh:31; the same list).
  auto lite = MegatronMoeArgs(Preset("deepseek-v2-lite"), l);
  ASSERT_TRUE(lite.ok()) << lite.status().message();
  EXPECT_TRUE(Has(*lite, "--moe-layer-freq '([0]*1+[1]*26)'"));
  // Qwen3-30B-A3B: every layer MoE, Megatron's default: no flag.
  auto qwen = MegatronMoeArgs(Preset("qwen3-30b-a3b"), l);
  ASSERT_TRUE(qwen.ok());
  for (const std::string& s : *qwen) EXPECT_EQ(s.find("--moe-layer-freq"), std::string::npos);
  EXPECT_FALSE(Has(*qwen, "--multi-latent-attention"));
}

TEST(MoeArgs, MegatronRules) {
  const ModelSpec mixtral = Preset("mixtral-8x7b");
  // arguments.py:1657-1658: num_experts % expert_model_parallel_size == 0 (8 % 3).
  MoeLaunch l{.ep = 3, .world = 64};
  auto a = MegatronMoeArgs(mixtral, l);
  ExpectRefused(a, "arguments.py:1657-1658");
  // parallel_state.py:874-884: world 64 % (etp 4 · ep 8 · pp 4 = 128) != 0.
  l.ep = 8;
  l.etp = 4;
  l.pp = 4;
  a = MegatronMoeArgs(mixtral, l);
  ExpectRefused(a, "parallel_state.py:874-884");
  // transformer_config.py:3002-3046: the EP a2a overlap with PP > 1 needs VPP,
  // refuses the allgather dispatcher and full recompute.
  l.etp = 1;
  l.pp = 2;
  l.a2a_overlap = true;
  a = MegatronMoeArgs(mixtral, l);
  ExpectRefused(a, "virtual pipeline");
  l.vpp = 2;
  ASSERT_TRUE(MegatronMoeArgs(mixtral, l).ok());
  EXPECT_TRUE(Has(*MegatronMoeArgs(mixtral, l), "--overlap-moe-expert-parallel-comm"));
  l.dispatcher = "allgather";
  EXPECT_FALSE(MegatronMoeArgs(mixtral, l).ok());
  l.dispatcher = "alltoall";
  l.full_recompute = true;
  EXPECT_FALSE(MegatronMoeArgs(mixtral, l).ok());
  // The flex dispatcher with its backend (transformer_config.py:891,898).
  l.full_recompute = false;
  l.dispatcher = "deepep";
  auto flex = MegatronMoeArgs(mixtral, l);
  ASSERT_TRUE(flex.ok());
  EXPECT_TRUE(Has(*flex, "--moe-token-dispatcher-type flex"));
  EXPECT_TRUE(Has(*flex, "--moe-flex-dispatcher-backend deepep"));
  // A dense model: nothing, and EP > 1 is refused (arguments.py:1655-1656).
  MoeLaunch dense;
  auto none = MegatronMoeArgs(Preset("llama2-7b"), dense);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  dense.ep = 2;
  EXPECT_FALSE(MegatronMoeArgs(Preset("llama2-7b"), dense).ok());
}

TEST(MoeArgs, TorchtitanExpertParallelDegree) {
  const ModelSpec m = Preset("qwen3-30b-a3b");
  MoeLaunch l{.ep = 8, .world = 16};
  auto ok = TorchtitanMoeLines(m, l, 16);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(*ok, std::vector<std::string>{"expert_parallel_degree = 8"});
  // parallel_dims.py:187-192: ep must divide dp_shard·cp·tp (6 does not divide 16).
  l.ep = 6;
  auto bad = TorchtitanMoeLines(m, l, 16);
  ExpectRefused(bad, "parallel_dims.py:187-192");
  // No expert tensor parallelism in its mesh.
  l.ep = 8;
  l.etp = 2;
  EXPECT_FALSE(TorchtitanMoeLines(m, l, 16).ok());
}

TEST(MoeArgs, DeepSpeedMoeLayer) {
  const ModelSpec m = Preset("mixtral-8x7b");
  MoeLaunch l{.ep = 8, .world = 16};
  auto call = DeepSpeedMoeLayerCall(m, l);
  ASSERT_TRUE(call.ok()) << call.status().message();
  EXPECT_EQ(*call,
            "deepspeed.moe.layer.MoE(hidden_size=4096, expert=expert_mlp, num_experts=8, "
            "ep_size=8, k=2, drop_tokens=False)");
  // layer.py:59: num_experts % ep_size.
  l.ep = 16;
  auto bad = DeepSpeedMoeLayerCall(m, l);
  ExpectRefused(bad, "layer.py:59");
  // groups.py:350-351: (world / pp) % ep (16 / 4 = 4 is not a multiple of 8).
  l.ep = 8;
  l.pp = 4;
  EXPECT_FALSE(DeepSpeedMoeLayerCall(m, l).ok());
  // Expert TP is the model's TP or none (groups.py:557-560).
  l.pp = 1;
  l.tp = 2;
  l.etp = 4;
  EXPECT_FALSE(DeepSpeedMoeLayerCall(m, l).ok());
}

}  // namespace
}  // namespace paratune::planner
