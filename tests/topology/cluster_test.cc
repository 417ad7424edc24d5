#include "topology/cluster.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "tests/topology/test_util.h"

namespace paratune::topology {
namespace {

using testing::ExpectRangeVerdict;
using testing::MustCluster;
using testing::MustParse;
using testing::SetAt;

const std::vector<std::string> kClusterPresets = {
    "alps",     "dgx-a100-40gb", "dgx-a100-80gb", "dgx-b200",    "dgx-b300", "dgx-h100",
    "dgx-h200", "frontier",      "gb200-nvl72",   "gb300-nvl72", "hgx-h800", "jean-zay-v100",
    "mi300x",   "mi325x",        "mi350x",        "mi355x",      "perlmutter", "polaris"};
constexpr Collective kAllCollectives[] = {Collective::kAllReduce, Collective::kAllGather,
                                          Collective::kReduceScatter, Collective::kAllToAll,
                                          Collective::kSendRecv};

std::vector<int> Divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i) {
    if (n % i == 0) d.push_back(i);
  }
  return d;
}

// ---------------------------------------------------------------------------
// Names and factors.

TEST(CollectiveTest, NamesRoundTrip) {
  for (Collective c : kAllCollectives) {
    Result<Collective> back = ParseCollective(CollectiveName(c));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, c);
  }
  EXPECT_STREQ(CollectiveName(Collective::kAllToAll), "alltoall");
  EXPECT_FALSE(ParseCollective("allreduce").ok());
  EXPECT_STREQ(TierName(Tier::kInterNode), "inter_node");
}

// nccl-tests (src/all_reduce.cu etc.): busbw = algbw × factor.
TEST(BusFactorTest, MatchesNcclTests) {
  for (int n = 2; n <= 64; ++n) {
    EXPECT_DOUBLE_EQ(BusFactor(Collective::kAllReduce, n), 2.0 * (n - 1) / n);
    EXPECT_DOUBLE_EQ(BusFactor(Collective::kAllGather, n), static_cast<double>(n - 1) / n);
    EXPECT_DOUBLE_EQ(BusFactor(Collective::kReduceScatter, n), static_cast<double>(n - 1) / n);
    EXPECT_DOUBLE_EQ(BusFactor(Collective::kAllToAll, n), static_cast<double>(n - 1) / n);
    EXPECT_DOUBLE_EQ(BusFactor(Collective::kSendRecv, n), 1.0);
  }
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kAllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kAllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kAllReduce, 1), 0.0);
}

// ---------------------------------------------------------------------------
// Presets, parsing, serialisation, fingerprints.

TEST(ClusterPresetTest, EveryPresetParsesAndIsListed) {
  testing::ExpectEveryPresetLoads<ClusterSpec>(ClusterPresetNames(), kClusterPresets,
                                               &ClusterPreset,
                                               [](const std::string& name, const ClusterSpec& c) {
                                                 EXPECT_GT(c.NodeInjectionGBps(), 0) << name;
                                               });
}

TEST(ClusterPresetTest, EveryNumberHasASource) {
  for (const std::string& name : kClusterPresets) {
    const ClusterSpec c = MustCluster(name);
    std::vector<std::string> fields = {"gpu",
                                       "gpus_per_node",
                                       "max_nodes",
                                       "intra_node_fabric",
                                       "intra_alpha_us",
                                       "nics_per_node",
                                       "nic_GBps",
                                       "nic_efficiency",
                                       "inter_alpha_us",
                                       "alltoall_efficiency",
                                       "network",
                                       "host_memory_GiB",
                                       "host_memory_GBps"};
    if (c.intra_node_fabric == "mesh") {
      fields.push_back("link_GBps");
      fields.push_back("link_efficiency");
    } else {
      fields.push_back("intra_node_GBps");
    }
    if (!c.intra_node_table.empty()) fields.push_back("intra_node_table");
    if (c.host_link_GBps > 0) fields.push_back("host_link_GBps");
    for (const std::string& f : fields) {
      EXPECT_TRUE(c.sources.count(f)) << name << " has no source for " << f;
    }
  }
}

TEST(ClusterPresetTest, PublishedFigures) {
  const ClusterSpec perlmutter = MustCluster("perlmutter");
  EXPECT_DOUBLE_EQ(perlmutter.gpu.PeakTflops(Precision::kBf16), 312);
  EXPECT_EQ(perlmutter.gpus_per_node, 4);
  // AxoNN's fitted β_node for Perlmutter is 59.52 GB/s.
  EXPECT_NEAR(perlmutter.NodeInjectionGBps(), 59.52, 0.05);
  EXPECT_DOUBLE_EQ(MustCluster("dgx-h100").gpu.PeakTflops(Precision::kBf16), 989);
  EXPECT_DOUBLE_EQ(MustCluster("frontier").gpu.PeakTflops(Precision::kBf16), 191.5);
  EXPECT_EQ(MustCluster("frontier").gpus_per_node, 8);
  EXPECT_EQ(MustCluster("alps").gpu.name, "gh200");
}

// Host side of the nodes (docs/presets.md): datasheet capacities, and the
// GPU<->host path each GPU gets when all transfer at once.
TEST(ClusterPresetTest, HostMemoryAndLinks) {
  for (const std::string& name : kClusterPresets) {
    const ClusterSpec c = MustCluster(name);
    EXPECT_GT(c.host_memory_GiB, 0) << name;
    EXPECT_GT(c.host_memory_GBps, 0) << name;
    EXPECT_GT(c.HostLinkGBps(), 0) << name;
  }
  EXPECT_DOUBLE_EQ(MustCluster("perlmutter").host_memory_GiB, 256);      // NERSC: 256 GB DDR4
  EXPECT_DOUBLE_EQ(MustCluster("dgx-a100-40gb").host_memory_GiB, 1024);  // DGX A100 320GB: 1 TB
  EXPECT_DOUBLE_EQ(MustCluster("dgx-a100-80gb").host_memory_GiB, 2048);  // DGX A100 640GB: 2 TB
  EXPECT_DOUBLE_EQ(MustCluster("dgx-h100").host_memory_GiB, 2048);       // DGX H100: 2 TB
  // Perlmutter and Polaris A100s each have their own PCIe 4.0 x16 to the CPU;
  // DGX A100 pairs two GPUs behind one switch uplink; GH200 is NVLink-C2C.
  EXPECT_DOUBLE_EQ(MustCluster("perlmutter").HostLinkGBps(), 31.5);
  EXPECT_DOUBLE_EQ(MustCluster("polaris").HostLinkGBps(), 31.5);
  EXPECT_DOUBLE_EQ(MustCluster("dgx-a100-40gb").HostLinkGBps(), 31.5 / 2);
  EXPECT_DOUBLE_EQ(MustCluster("alps").HostLinkGBps(), 450);
  // The GPU preset's figure stands where the cluster does not override it.
  EXPECT_DOUBLE_EQ(MustCluster("dgx-h100").HostLinkGBps(),
                   MustCluster("dgx-h100").gpu.host_link_GBps);
}

TEST(ClusterSpecTest, HostFieldsParseAndRejectNegatives) {
  Json j = ClusterSpecToJson(MustCluster("perlmutter"));
  j["host_memory_GiB"] = -1;
  Result<ClusterSpec> bad = ParseClusterSpec(j, "/cluster");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("/cluster/host_memory_GiB"), std::string::npos)
      << bad.status().ToString();
  // A cluster without host fields keeps its fingerprint when they are added as 0.
  Json none = ClusterSpecToJson(MustCluster("perlmutter"));
  none.erase("host_memory_GiB");
  none.erase("host_memory_GBps");
  none.erase("host_link_GBps");
  Result<ClusterSpec> a = ParseClusterSpec(none, "");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->host_memory_GiB, 0);
  none["host_memory_GiB"] = 0;
  Result<ClusterSpec> b = ParseClusterSpec(none, "");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Fingerprint(*a), Fingerprint(*b));
  EXPECT_NE(Fingerprint(*a), Fingerprint(MustCluster("perlmutter")));
}

TEST(ClusterSpecTest, CollectiveModelAndNvlsParseAndRejectBadValues) {
  EXPECT_EQ(MustCluster("dgx-h100").collective_model, "nccl");
  EXPECT_EQ(MustCluster("perlmutter").collective_model, "alpha_beta");
  EXPECT_DOUBLE_EQ(MustCluster("dgx-h100").nvls_GBps, 480);
  EXPECT_DOUBLE_EQ(MustCluster("dgx-a100-80gb").nvls_GBps, 0);  // no NVLS before Hopper
  Json j = ClusterSpecToJson(MustCluster("dgx-h100"));
  j["collective_model"] = "logp";
  Result<ClusterSpec> bad = ParseClusterSpec(j, "/cluster");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("/cluster/collective_model"), std::string::npos)
      << bad.status().ToString();
  // NVLS reduces in the switch: a mesh has none.
  Json mesh = ClusterSpecToJson(MustCluster("mi300x"));
  mesh["nvls_GBps"] = 400;
  Result<ClusterSpec> m = ParseClusterSpec(mesh, "/cluster");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("/cluster/nvls_GBps"), std::string::npos) << m.status().ToString();
  // The alpha-beta model is t = alpha * p + busbw factor * N / busbw whatever the size.
  Json ab = ClusterSpecToJson(MustCluster("dgx-h100"));
  ab["collective_model"] = "alpha_beta";
  Result<ClusterSpec> c = ParseClusterSpec(ab, "");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_NE(Fingerprint(*c), Fingerprint(MustCluster("dgx-h100")));
  EXPECT_NEAR(CollectiveSeconds(*c, Collective::kAllGather, 1, 8, 1e9),
              3e-6 * 8 + (7.0 / 8.0) * 1e9 / 370e9, 1e-12);
}

// A cluster on AWS EFA: its hop latency enters every inter-node option, and
// p4d's send/recv protocol leaves NCCL the Simple protocol alone
// (aws-ofi-nccl forces NCCL_PROTO=simple there). Published floors
// (nccl_tables.json, aws-samples): 8-byte all-reduce on 2 x p4de 163 us, on
// 2 x p5 69 us, where InfiniBand's is about 30 us (Nebius H100).
TEST(ClusterSpecTest, NetTransportsPriceTheirHopAndProtocols) {
  EXPECT_EQ(MustCluster("dgx-h100").net_transport, "verbs");
  auto with = [](const char* preset, const char* transport) {
    Json j = ClusterSpecToJson(MustCluster(preset));
    j["nics_per_node"] = 4;
    j["nic_GBps"] = 12.5;
    j["net_transport"] = transport;
    Result<ClusterSpec> c = ParseClusterSpec(j, "/cluster");
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? *c : ClusterSpec{};
  };
  const ClusterSpec p4de = with("dgx-a100-80gb", "efa-sendrecv");
  const ClusterSpec p5 = with("dgx-h100", "efa");
  const ClusterSpec ib = with("dgx-h100", "verbs");
  EXPECT_EQ(ClusterSpecToJson(p4de)["net_transport"], "efa-sendrecv");
  EXPECT_NE(Fingerprint(p5), Fingerprint(ib));
  const LinkCost p4de_cost = GroupCost(p4de, Collective::kAllReduce, 1, 16);
  for (int i = 0; i < p4de_cost.options.count; ++i) {
    EXPECT_EQ(p4de_cost.options.items[i].protocol, Protocol::kSimple);
  }
  const double p4de_us = 1e6 * CollectiveSeconds(p4de, Collective::kAllReduce, 1, 16, 8);
  const double p5_us = 1e6 * CollectiveSeconds(p5, Collective::kAllReduce, 1, 16, 8);
  const double ib_us = 1e6 * CollectiveSeconds(ib, Collective::kAllReduce, 1, 16, 8);
  EXPECT_NEAR(p4de_us / 163.3, 1.0, 0.15);
  EXPECT_NEAR(p5_us / 69.1, 1.0, 0.15);
  EXPECT_NEAR(ib_us / 29.8, 1.0, 0.15);
  // Inside one node no NIC is crossed: the transport changes nothing but the protocols.
  EXPECT_DOUBLE_EQ(CollectiveSeconds(p5, Collective::kAllReduce, 1, 8, 1 << 20),
                   CollectiveSeconds(ib, Collective::kAllReduce, 1, 8, 1 << 20));
  // A stated latency overrides the transport's; bad values are refused by name.
  Json j = ClusterSpecToJson(ib);
  j["net_latency_us"] = 50;
  Result<ClusterSpec> slow = ParseClusterSpec(j, "/cluster");
  ASSERT_TRUE(slow.ok()) << slow.status().ToString();
  EXPECT_GT(CollectiveSeconds(*slow, Collective::kAllReduce, 1, 16, 8), 2 * ib_us * 1e-6);
  j["net_latency_us"] = -1;
  Result<ClusterSpec> negative = ParseClusterSpec(j, "/cluster");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("/cluster/net_latency_us"), std::string::npos);
  j.erase("net_latency_us");
  j["net_transport"] = "tcp";
  Result<ClusterSpec> unknown = ParseClusterSpec(j, "/cluster");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("\"efa-sendrecv\""), std::string::npos)
      << unknown.status().ToString();
}

TEST(ClusterPresetTest, UnknownNameIsNotFoundAndListsValidNames) {
  ASSERT_NO_FATAL_FAILURE(testing::ExpectUnknownPresetListsTheKnown<ClusterSpec>(
      "selene", &ClusterPreset, kClusterPresets));
  Result<ClusterSpec> r = ResolveCluster(Json("selene"), "/cluster");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("/cluster"), std::string::npos);
  EXPECT_NE(r.status().message().find("perlmutter"), std::string::npos);
}

TEST(ClusterPresetTest, UnknownNameSuggestsTheClosest) {
  const std::string m = ClusterPreset("dgx-h10").status().message();
  const size_t ask = m.find("did you mean");
  ASSERT_NE(ask, std::string::npos) << m;
  EXPECT_LT(m.find("dgx-h100", ask), m.find("(valid:")) << m;
}

// Jean Zay's quad-V100 nodes: four V100s linked pairwise by NVLink2 (no
// switch), four Omni-Path links per node, a slower network per GPU than a
// DGX A100's HDR.
TEST(ClusterPresetTest, JeanZayIsFourV100sOnAnNvlinkMesh) {
  const ClusterSpec c = MustCluster("jean-zay-v100");
  EXPECT_EQ(c.gpu.name, "v100-32gb");
  EXPECT_EQ(c.gpus_per_node, 4);
  EXPECT_EQ(c.intra_node_fabric, "mesh");
  ASSERT_EQ(c.link_GBps.size(), 4u);
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) EXPECT_EQ(c.link_GBps[a][b] > 0, a != b) << a << "," << b;
  }
  EXPECT_EQ(c.nics_per_node, 4);
  EXPECT_LT(c.nic_efficiency, 1);  // achievable below the line rate
  EXPECT_LT(c.InterNodeGBpsPerGpu(), MustCluster("dgx-a100-40gb").InterNodeGBpsPerGpu());
  EXPECT_GT(c.host_memory_GiB, 0);
}

TEST(ResolveClusterTest, StringObjectOrError) {
  Result<ClusterSpec> byName = ResolveCluster(Json("dgx-h100"), "/cluster");
  ASSERT_TRUE(byName.ok());
  EXPECT_EQ(byName->gpu.name, "h100-sxm");
  Result<ClusterSpec> byObject = ResolveCluster(ClusterSpecToJson(*byName), "/cluster");
  ASSERT_TRUE(byObject.ok()) << byObject.status().ToString();
  EXPECT_EQ(Fingerprint(*byObject), Fingerprint(*byName));
  Result<ClusterSpec> bad = ResolveCluster(Json(42), "/cluster");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("/cluster"), std::string::npos);
}

TEST(FingerprintTest, RoundTripKeepsIt) {
  for (const std::string& name : kClusterPresets) {
    const ClusterSpec c = MustCluster(name);
    const std::string fp = Fingerprint(c);
    ASSERT_EQ(fp.size(), 16u);
    for (char ch : fp) EXPECT_TRUE((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')) << fp;
    // Object and text round trips, as a file or a REST body would go.
    Result<ClusterSpec> back = ParseClusterSpec(ClusterSpecToJson(c), "");
    ASSERT_TRUE(back.ok()) << name << ": " << back.status().ToString();
    EXPECT_EQ(Fingerprint(*back), fp) << name;
    Result<ClusterSpec> text = ParseClusterSpec(MustParse(ClusterSpecToJson(c).dump(2)), "");
    ASSERT_TRUE(text.ok()) << name << ": " << text.status().ToString();
    EXPECT_EQ(Fingerprint(*text), fp) << name;
    EXPECT_EQ(ClusterSpecToJson(*text), ClusterSpecToJson(c)) << name;
  }
}

TEST(FingerprintTest, DistinctPresetsDiffer) {
  for (size_t a = 0; a < kClusterPresets.size(); ++a) {
    for (size_t b = a + 1; b < kClusterPresets.size(); ++b) {
      EXPECT_NE(Fingerprint(MustCluster(kClusterPresets[a])),
                Fingerprint(MustCluster(kClusterPresets[b])))
          << kClusterPresets[a] << " vs " << kClusterPresets[b];
    }
  }
}

TEST(FingerprintTest, ChangesWithBandwidthNotWithNames) {
  const ClusterSpec base = MustCluster("perlmutter");
  const std::string fp = Fingerprint(base);

  ClusterSpec c = base;
  c.name = "perlmutter-renamed";
  c.source = "elsewhere";
  c.sources["nic_GBps"] = "another source";
  c.gpu.name = "other-gpu";
  c.gpu.display_name = "Other";
  c.gpu.source = "x";
  EXPECT_EQ(Fingerprint(c), fp);

  c = base;
  c.nic_GBps = 50;
  EXPECT_NE(Fingerprint(c), fp);
  c = base;
  c.link_GBps[0][1] = 50;
  EXPECT_NE(Fingerprint(c), fp);
  c = base;
  c.intra_node_table[1].busbw_GBps = 226;
  EXPECT_NE(Fingerprint(c), fp);
  c = base;
  c.gpu.hbm_GBps += 1;
  EXPECT_NE(Fingerprint(c), fp);
  c = base;
  c.gpu.gemm_efficiency[static_cast<int>(Precision::kBf16)][3].efficiency = 0.63;
  EXPECT_NE(Fingerprint(c), fp);
  c = base;
  c.fits.push_back({Collective::kAllReduce, Tier::kInterNode, 8, 10, 40});
  EXPECT_NE(Fingerprint(c), fp);

  // Table order does not matter; the values do.
  c = base;
  std::swap(c.intra_node_table[0], c.intra_node_table[2]);
  EXPECT_EQ(Fingerprint(c), fp);
}

// The request form and the equivalent full form describe the same machine.
TEST(ClusterSpecTest, RequestForm) {
  const Json req = MustParse(R"({"gpu": "h100-sxm", "gpus_per_node": 8,
                                 "intra_node_GBps": 300, "inter_node_GBps_per_gpu": 25})");
  Result<ClusterSpec> c = ParseClusterSpec(req, "/cluster");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->intra_node_fabric, "nvswitch");
  EXPECT_EQ(c->nics_per_node, 8);
  EXPECT_DOUBLE_EQ(c->nic_efficiency, 1.0);
  EXPECT_DOUBLE_EQ(c->NodeInjectionGBps(), 200);
  EXPECT_DOUBLE_EQ(c->InterNodeGBpsPerGpu(), 25);
  EXPECT_DOUBLE_EQ(GroupCost(*c, Collective::kAllReduce, 1, 8).busbw_GBps, 300);
  EXPECT_DOUBLE_EQ(GroupCost(*c, Collective::kAllReduce, 8, 4).busbw_GBps, 25);

  Result<ClusterSpec> full = ParseClusterSpec(ClusterSpecToJson(*c), "/cluster");
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ(Fingerprint(*full), Fingerprint(*c));

  // An inline GPU object works too.
  Json inline_gpu = req;
  inline_gpu["gpu"] = GpuSpecToJson(MustCluster("dgx-h100").gpu);
  Result<ClusterSpec> c2 = ParseClusterSpec(inline_gpu, "/cluster");
  ASSERT_TRUE(c2.ok()) << c2.status().ToString();
  EXPECT_EQ(Fingerprint(*c2), Fingerprint(*c));

  Json unknown = req;
  unknown["nics_per_node"] = 4;  // belongs to the full form only
  EXPECT_NE(ParseClusterSpec(unknown, "/cluster")
                .status()
                .message()
                .find("/cluster/nics_per_node: unknown key"),
            std::string::npos);
  Json bad_gpu = req;
  bad_gpu["gpu"] = "h100";
  Result<ClusterSpec> b = ParseClusterSpec(bad_gpu, "/cluster");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kNotFound);
  EXPECT_NE(b.status().message().find("/cluster/gpu"), std::string::npos);
  EXPECT_NE(b.status().message().find("h100-sxm"), std::string::npos);
}

TEST(ClusterSpecTest, StrictErrorsNameThePointer) {
  const Json base = ClusterSpecToJson(MustCluster("perlmutter"));
  struct Case {
    std::vector<std::string> path;  // object keys / array indices to reach the field
    Json value;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{"nic_Gbps"}, 25, "/cluster/nic_Gbps: unknown key"},
      {{"intra_node_table", "1", "strides"}, 1, "/cluster/intra_node_table/1/strides: unknown key"},
      {{"gpu", "memory_GB"}, 1, "/cluster/gpu/memory_GB: unknown key"},
      {{"intra_node_table", "0", "group_size"}, 3, "/cluster/intra_node_table/0/group_size"},
      {{"link_GBps", "1", "1"}, 5, "/cluster/link_GBps/1/1"},
      {{"nic_efficiency"}, 1.2, "/cluster/nic_efficiency"},
      {{"intra_node_fabric"}, "torus", "/cluster/intra_node_fabric"},
      {{"schema"}, "paratune.cluster/v2", "/cluster/schema"},
  };
  for (const Case& c : cases) {
    Result<ClusterSpec> r = ParseClusterSpec(SetAt(base, c.path, c.value), "/cluster");
    ASSERT_FALSE(r.ok()) << c.expected;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos) << r.status().message();
  }
  Json missing = base;
  missing.erase("nics_per_node");
  EXPECT_NE(ParseClusterSpec(missing, "/cluster")
                .status()
                .message()
                .find("/cluster/nics_per_node: is required"),
            std::string::npos);
}

TEST(ClusterSpecTest, MeshMustBeConnected) {
  Json j = ClusterSpecToJson(MustCluster("polaris"));
  for (int k = 0; k < 4; ++k) {
    if (k != 3) j["link_GBps"][3][k] = j["link_GBps"][k][3] = 0;
  }
  Result<ClusterSpec> r = ParseClusterSpec(j, "/cluster");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/cluster/link_GBps"), std::string::npos);
  EXPECT_NE(r.status().message().find("unreachable"), std::string::npos);
}

// ---------------------------------------------------------------------------
// Placement queries.

// AxoNN's rule on Perlmutter (axonn-notes.md §2.3).
TEST(GroupCostTest, PerlmutterAxonnRule) {
  const ClusterSpec c = MustCluster("perlmutter");
  LinkCost x = GroupCost(c, Collective::kAllReduce, 1, 4);
  EXPECT_EQ(x.tier, Tier::kIntraNode);
  EXPECT_DOUBLE_EQ(x.busbw_GBps, 225);
  EXPECT_DOUBLE_EQ(x.alpha_us, 9);
  EXPECT_DOUBLE_EQ(GroupCost(c, Collective::kAllReduce, 1, 2).busbw_GBps, 76);
  EXPECT_DOUBLE_EQ(GroupCost(c, Collective::kAllGather, 2, 2).busbw_GBps, 76);

  // Stride 4 spans nodes: four group instances share each node's NICs.
  for (int size : {2, 4, 8, 64}) {
    LinkCost z = GroupCost(c, Collective::kAllGather, 4, size);
    EXPECT_EQ(z.tier, Tier::kInterNode);
    EXPECT_DOUBLE_EQ(z.busbw_GBps, c.NodeInjectionGBps() / 4) << size;
    EXPECT_DOUBLE_EQ(z.alpha_us, 9);
  }
  // Stride beyond a node: still min(stride, gpus_per_node) = 4 sharers.
  EXPECT_DOUBLE_EQ(GroupCost(c, Collective::kReduceScatter, 16, 8).busbw_GBps,
                   c.NodeInjectionGBps() / 4);
  // Stride 2, size 4 spans two nodes: two instances share the NICs.
  EXPECT_DOUBLE_EQ(GroupCost(c, Collective::kAllGather, 2, 4).busbw_GBps,
                   c.NodeInjectionGBps() / 2);
  // Stride 1 across nodes: the whole node injection, under the 4-GPU figure.
  EXPECT_DOUBLE_EQ(GroupCost(c, Collective::kAllGather, 1, 8).busbw_GBps, c.NodeInjectionGBps());
}

// Across nodes the 2025 fit is of all-gather (59.52 GB/s per node); the 2024
// table measured all-reduce busbw (axonn-notes.md §2.3): 80 GB/s for a
// stride-1 group of >= 8, 40 at stride 2, 20 at stride >= 4 on Perlmutter;
// 40 (16 GCDs, stride 1), 20, 10 and 5 (stride >= 8) on Frontier.
TEST(GroupCostTest, InterNodeAllReduceIsTheMeasuredTable) {
  const ClusterSpec p = MustCluster("perlmutter");
  EXPECT_NEAR(GroupCost(p, Collective::kAllReduce, 1, 8).busbw_GBps, 80, 1e-9);
  EXPECT_NEAR(GroupCost(p, Collective::kAllReduce, 1, 64).busbw_GBps, 80, 1e-9);
  EXPECT_NEAR(GroupCost(p, Collective::kAllReduce, 2, 4).busbw_GBps, 40, 1e-9);
  EXPECT_NEAR(GroupCost(p, Collective::kAllReduce, 2, 16).busbw_GBps, 40, 1e-9);
  for (int stride : {4, 8, 64}) {
    for (int size : {2, 4, 8}) {
      EXPECT_NEAR(GroupCost(p, Collective::kAllReduce, stride, size).busbw_GBps, 20, 1e-9)
          << stride << " " << size;
    }
  }
  EXPECT_NEAR(GroupCost(p, Collective::kReduceScatter, 4, 2).busbw_GBps, 59.52 / 4, 0.02);
  // Inside a node the measured intra-node table still rules.
  EXPECT_DOUBLE_EQ(GroupCost(p, Collective::kAllReduce, 1, 4).busbw_GBps, 225);

  const ClusterSpec f = MustCluster("frontier");
  EXPECT_NEAR(GroupCost(f, Collective::kAllReduce, 1, 16).busbw_GBps, 40, 1e-9);
  EXPECT_NEAR(GroupCost(f, Collective::kAllReduce, 2, 8).busbw_GBps, 20, 1e-9);
  EXPECT_NEAR(GroupCost(f, Collective::kAllReduce, 4, 4).busbw_GBps, 10, 1e-9);
  EXPECT_NEAR(GroupCost(f, Collective::kAllReduce, 8, 2).busbw_GBps, 5, 1e-9);
  // A cluster that states no separate figure uses one for every collective.
  const ClusterSpec h = MustCluster("dgx-h100");
  EXPECT_DOUBLE_EQ(GroupCost(h, Collective::kAllReduce, 8, 16).busbw_GBps,
                   GroupCost(h, Collective::kAllGather, 8, 16).busbw_GBps);
}

TEST(GroupCostTest, CollectiveSecondsFormula) {
  const ClusterSpec c = MustCluster("perlmutter");
  const double bytes = 1e9;
  // α·p + 2(p−1)/p · N / busbw with the table's 225 GB/s and α = 9 µs.
  EXPECT_NEAR(CollectiveSeconds(c, Collective::kAllReduce, 1, 4, bytes),
              9e-6 * 4 + 1.5 * bytes / 225e9, 1e-15);
  const double inj = c.NodeInjectionGBps();
  EXPECT_NEAR(CollectiveSeconds(c, Collective::kAllGather, 4, 16, bytes),
              9e-6 * 16 + (15.0 / 16.0) * bytes / (inj / 4 * 1e9), 1e-12);
  EXPECT_DOUBLE_EQ(CollectiveSeconds(c, Collective::kAllReduce, 1, 1, bytes), 0.0);
  // Only latency for an empty buffer.
  EXPECT_DOUBLE_EQ(CollectiveSeconds(c, Collective::kAllReduce, 1, 4, 0), 36e-6);
}

// Reference figures (cost-model.md §3, §7) out of the switch presets.
TEST(GroupCostTest, DgxFigures) {
  const ClusterSpec h100 = MustCluster("dgx-h100");
  EXPECT_DOUBLE_EQ(GroupCost(h100, Collective::kAllGather, 1, 8).busbw_GBps, 370);
  EXPECT_DOUBLE_EQ(GroupCost(h100, Collective::kAllGather, 2, 4).busbw_GBps, 370);
  // One GPU per node per group (stride 8): the per-NIC figure, 46-48 GB/s.
  const double per_nic = GroupCost(h100, Collective::kAllReduce, 8, 16).busbw_GBps;
  EXPECT_GE(per_nic, 46);
  EXPECT_LE(per_nic, 48);
  // Stride 1 over nodes: 8 NICs (376 GB/s) capped by the 370 GB/s switch figure.
  EXPECT_DOUBLE_EQ(GroupCost(h100, Collective::kAllReduce, 1, 16).busbw_GBps, 370);

  const ClusterSpec a100 = MustCluster("dgx-a100-80gb");
  EXPECT_DOUBLE_EQ(GroupCost(a100, Collective::kAllReduce, 1, 8).busbw_GBps, 230);
  EXPECT_NEAR(GroupCost(a100, Collective::kAllReduce, 8, 4).busbw_GBps, 24, 0.5);
}

// Rack-scale NVLink (GB200 NVL72: 72 GPUs over 18 trays of 4): a tensor- or
// expert-parallel group of 16 or more GPUs inside the rack runs at NVLink
// speed, where the same group on 8-GPU DGX B200 nodes crosses the NICs.
TEST(GroupCostTest, NvlinkDomainSpansTrays) {
  const ClusterSpec nvl = MustCluster("gb200-nvl72");
  const ClusterSpec dgx = MustCluster("dgx-b200");
  EXPECT_EQ(nvl.gpus_per_node, 4);
  EXPECT_EQ(nvl.DomainGpus(), 72);
  for (int size : {16, 32, 64}) {
    for (Collective coll :
         {Collective::kAllReduce, Collective::kAllGather, Collective::kAllToAll}) {
      const LinkCost in_rack = GroupCost(nvl, coll, 1, size);
      const LinkCost dgx_cost = GroupCost(dgx, coll, 1, size);
      EXPECT_EQ(in_rack.tier, Tier::kIntraNode) << size;
      EXPECT_EQ(dgx_cost.tier, Tier::kInterNode) << size;
      // NVLink 5 port figure vs 8 x 400 Gb/s NICs per DGX node.
      EXPECT_GT(in_rack.busbw_GBps, 1.9 * dgx_cost.busbw_GBps) << size;
      const double bytes = 1e9;
      EXPECT_LT(CollectiveSeconds(nvl, coll, 1, size, bytes),
                CollectiveSeconds(dgx, coll, 1, size, bytes))
          << size;
    }
  }
  // A group of 16 within the rack gets the same switch figure as one of 4 in a tray.
  EXPECT_DOUBLE_EQ(GroupCost(nvl, Collective::kAllGather, 1, 16).busbw_GBps,
                   GroupCost(nvl, Collective::kAllGather, 1, 4).busbw_GBps);
  // An expert-parallel group strided over the tensor group stays in the rack too.
  EXPECT_EQ(GroupCost(nvl, Collective::kAllToAll, 4, 16).tier, Tier::kIntraNode);
  // A group that needs more than one rack (144 GPUs, or 16 at stride 8 = 128
  // GPUs) leaves it through the rack's NICs, shared by the group instances laid
  // on the rack (OCI's 2-rack GB200 all-reduce keeps 800 of one rack's 890 GB/s
  // busbw, shared/calibration/nccl_tables.json): 18 trays x 4 x 50 GB/s x 0.94
  // over min(stride, 72), capped by the NVLink figure.
  const double rack = 18 * 4 * 50 * 0.94;
  for (auto [stride, size] : {std::pair{1, 144}, {8, 16}}) {
    const LinkCost across = GroupCost(nvl, Collective::kAllGather, stride, size);
    EXPECT_EQ(across.tier, Tier::kInterNode) << stride << "x" << size;
    EXPECT_NEAR(across.busbw_GBps, std::min(rack / stride, 740.0), 1e-9) << stride << "x" << size;
  }
  // The GB300 rack keeps the domain and has 800 Gb/s NICs.
  EXPECT_EQ(MustCluster("gb300-nvl72").DomainGpus(), 72);
  EXPECT_DOUBLE_EQ(MustCluster("gb300-nvl72").NodeInjectionGBps(), 4 * 100 * 0.94);
}

TEST(ClusterSpecTest, NvlinkDomainIsValidated) {
  Json j = ClusterSpecToJson(MustCluster("gb200-nvl72"));
  Result<ClusterSpec> back = ParseClusterSpec(j, "/cluster");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(Fingerprint(*back), Fingerprint(MustCluster("gb200-nvl72")));
  j["nvlink_domain_gpus"] = 70;  // not a multiple of 4 GPUs per tray
  back = ParseClusterSpec(j, "/cluster");
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.status().message().find("/cluster/nvlink_domain_gpus"), std::string::npos);
  j = ClusterSpecToJson(MustCluster("mi300x"));
  j["nvlink_domain_gpus"] = 16;  // a mesh cannot span nodes
  EXPECT_FALSE(ParseClusterSpec(j, "/cluster").ok());
  // A domain of one node changes nothing, fingerprint included.
  j = ClusterSpecToJson(MustCluster("dgx-h100"));
  j["nvlink_domain_gpus"] = 8;
  back = ParseClusterSpec(j, "/cluster");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(Fingerprint(*back), Fingerprint(MustCluster("dgx-h100")));
}

// MI300X-class nodes: 8 GPUs fully connected by xGMI, 7 links each, one link
// per pair: two GPUs talk at one link (64 GB/s raw, ~48 usable per AMD's
// RCCL/xGMI blog), the 8-GPU ring sums all seven.
TEST(GroupCostTest, InstinctMeshPairIsOneLink) {
  const ClusterSpec mi = MustCluster("mi300x");
  EXPECT_NEAR(GroupCost(mi, Collective::kSendRecv, 1, 2).busbw_GBps, 48, 1e-9);
  EXPECT_NEAR(GroupCost(mi, Collective::kAllReduce, 1, 2).busbw_GBps, 48, 1e-9);
  EXPECT_NEAR(GroupCost(mi, Collective::kAllReduce, 1, 8).busbw_GBps, 7 * 48, 1e-9);
  EXPECT_NEAR(GroupCost(mi, Collective::kAllGather, 2, 4).busbw_GBps, 3 * 48, 1e-9);
  EXPECT_GT(GroupCost(MustCluster("mi355x"), Collective::kSendRecv, 1, 2).busbw_GBps, 48);
}

// H800: the same GPU as H100 with NVLink cut to 400 GB/s bidirectional;
// DeepSeek-V3's report measured 160 GB/s.
TEST(GroupCostTest, H800NvlinkIsCut) {
  const ClusterSpec h800 = MustCluster("hgx-h800");
  const ClusterSpec h100 = MustCluster("dgx-h100");
  EXPECT_DOUBLE_EQ(GroupCost(h800, Collective::kAllGather, 1, 8).busbw_GBps, 160);
  EXPECT_LT(GroupCost(h800, Collective::kAllGather, 1, 8).busbw_GBps,
            0.5 * GroupCost(h100, Collective::kAllGather, 1, 8).busbw_GBps);
  EXPECT_DOUBLE_EQ(h800.NodeInjectionGBps(), h100.NodeInjectionGBps());
}

TEST(GroupCostTest, MeshLinkModel) {
  // Polaris has no table: link_efficiency × the member's summed links.
  const ClusterSpec polaris = MustCluster("polaris");
  EXPECT_NEAR(GroupCost(polaris, Collective::kAllReduce, 1, 4).busbw_GBps, 0.76 * 300, 1e-9);
  EXPECT_NEAR(GroupCost(polaris, Collective::kAllReduce, 1, 2).busbw_GBps, 0.76 * 100, 1e-9);
  EXPECT_NEAR(GroupCost(MustCluster("alps"), Collective::kAllReduce, 1, 4).busbw_GBps, 0.76 * 450,
              1e-9);
  // Frontier: the table covers the measured shapes...
  const ClusterSpec frontier = MustCluster("frontier");
  EXPECT_DOUBLE_EQ(GroupCost(frontier, Collective::kAllReduce, 1, 2).busbw_GBps, 129);
  EXPECT_DOUBLE_EQ(GroupCost(frontier, Collective::kAllReduce, 4, 2).busbw_GBps, 36);
  // ...and the link model covers the rest: with the table removed, a stride-1
  // pair is an in-package 200 GB/s link, a stride-4 pair (0,4) has no direct
  // link and takes its widest routed path (50 GB/s via GCD 2 or 6).
  ClusterSpec bare = frontier;
  bare.intra_node_table.clear();
  EXPECT_NEAR(GroupCost(bare, Collective::kAllReduce, 1, 2).busbw_GBps, 0.645 * 200, 1e-9);
  EXPECT_NEAR(GroupCost(bare, Collective::kAllReduce, 4, 2).busbw_GBps, 0.645 * 50, 1e-9);
  // Stride 2, size 4: instance {0,2,4,6} gives each member 150 GB/s of direct
  // links, but in {1,3,5,7} GCD 1 has only 50 + 50 GB/s (to 3 and 5): the
  // slowest instance sets the pace.
  EXPECT_NEAR(GroupCost(bare, Collective::kAllReduce, 2, 4).busbw_GBps, 0.645 * 100, 1e-9);
}

TEST(GroupCostTest, SendRecvUsesThePairPath) {
  const ClusterSpec c = MustCluster("perlmutter");
  LinkCost p = GroupCost(c, Collective::kSendRecv, 2, 2);
  EXPECT_EQ(p.tier, Tier::kIntraNode);
  EXPECT_NEAR(p.busbw_GBps, 0.76 * 100, 1e-9);
  LinkCost q = GroupCost(c, Collective::kSendRecv, 4, 2);
  EXPECT_EQ(q.tier, Tier::kInterNode);
  EXPECT_DOUBLE_EQ(q.busbw_GBps, c.NodeInjectionGBps() / 4);
  EXPECT_DOUBLE_EQ(GroupCost(MustCluster("dgx-h100"), Collective::kSendRecv, 4, 2).busbw_GBps, 370);
}

TEST(GroupCostTest, AllToAllEfficiency) {
  for (const std::string& name : kClusterPresets) {
    const ClusterSpec c = MustCluster(name);
    for (int stride : {1, 2, c.gpus_per_node, 2 * c.gpus_per_node}) {
      const LinkCost ag = GroupCost(c, Collective::kAllGather, stride, 4);
      const LinkCost a2a = GroupCost(c, Collective::kAllToAll, stride, 4);
      if (a2a.tier == Tier::kIntraNode) {
        EXPECT_NEAR(a2a.busbw_GBps, ag.busbw_GBps * c.alltoall_efficiency, 1e-9) << name;
      } else {
        // Across nodes each GPU pushes its own bytes through its NIC share:
        // never more than the ring gets (collective_algorithms_test checks
        // the published figures).
        EXPECT_LE(a2a.busbw_GBps, ag.busbw_GBps + 1e-9) << name << " stride " << stride;
        EXPECT_GT(a2a.busbw_GBps, 0) << name;
      }
    }
  }
}

TEST(GroupCostTest, NonDividingBlockIsInterNode) {
  const ClusterSpec c = MustCluster("dgx-h100");
  // Stride 3, size 2: the instance {6, 9} straddles nodes 0 and 1.
  EXPECT_EQ(GroupCost(c, Collective::kAllReduce, 3, 2).tier, Tier::kInterNode);
  EXPECT_EQ(GroupCost(c, Collective::kAllReduce, 2, 4).tier, Tier::kIntraNode);
  EXPECT_EQ(GroupCost(c, Collective::kAllReduce, 1, 3).tier, Tier::kInterNode);
}

TEST(GroupCostTest, TableFallbackRules) {
  Json j = MustParse(R"({"name": "toy", "gpu": "a100-80gb", "gpus_per_node": 8,
    "intra_node_fabric": "nvswitch", "intra_node_GBps": 200, "nics_per_node": 8, "nic_GBps": 25,
    "intra_node_table": [{"stride": 1, "group_size": 2, "busbw_GBps": 50},
                         {"stride": 1, "group_size": 8, "busbw_GBps": 100}]})");
  Result<ClusterSpec> c = ParseClusterSpec(j, "");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_DOUBLE_EQ(GroupCost(*c, Collective::kAllReduce, 1, 8).busbw_GBps, 100);  // exact
  // (1, 4): sizes 2 and 8 are equally near in log2; the lower busbw wins.
  EXPECT_DOUBLE_EQ(GroupCost(*c, Collective::kAllReduce, 1, 4).busbw_GBps, 50);
  // No stride-2 entry: the link model (the switch figure).
  EXPECT_DOUBLE_EQ(GroupCost(*c, Collective::kAllReduce, 2, 2).busbw_GBps, 200);
}

TEST(GroupCostTest, MeasuredFitsHaveTheLastWord) {
  ClusterSpec c = MustCluster("dgx-h100");
  c.fits.push_back({Collective::kAllReduce, Tier::kIntraNode, 8, 2.5, 480});
  c.fits.push_back({Collective::kAllReduce, Tier::kInterNode, 16, 7, 300});
  c.fits.push_back({Collective::kAllReduce, Tier::kInterNode, 1024, 9, 200});
  LinkCost a = GroupCost(c, Collective::kAllReduce, 1, 8);
  EXPECT_DOUBLE_EQ(a.busbw_GBps, 480);
  EXPECT_DOUBLE_EQ(a.alpha_us, 2.5);
  EXPECT_DOUBLE_EQ(GroupCost(c, Collective::kAllReduce, 1, 2).busbw_GBps, 480);  // nearest size
  // Inter-node: nearest group size (32 is nearer 16 than 1024), divided by the
  // min(stride, 8) instances sharing the NICs.
  LinkCost b = GroupCost(c, Collective::kAllReduce, 2, 32);
  EXPECT_DOUBLE_EQ(b.busbw_GBps, 300.0 / 2);
  EXPECT_DOUBLE_EQ(b.alpha_us, 7);
  EXPECT_DOUBLE_EQ(GroupCost(c, Collective::kAllReduce, 8, 512).busbw_GBps, 200.0 / 8);
  // Other collectives keep the model.
  EXPECT_DOUBLE_EQ(GroupCost(c, Collective::kAllGather, 1, 8).busbw_GBps, 370);
}

TEST(GroupCostTest, NoNicsMeansUnreachableAcrossNodes) {
  Json j = MustParse(R"({"name": "box", "gpu": "h100-sxm", "gpus_per_node": 8,
    "intra_node_GBps": 370, "nics_per_node": 0})");
  Result<ClusterSpec> c = ParseClusterSpec(j, "");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_DOUBLE_EQ(GroupCost(*c, Collective::kAllReduce, 1, 8).busbw_GBps, 370);
  EXPECT_DOUBLE_EQ(GroupCost(*c, Collective::kAllReduce, 1, 16).busbw_GBps, 0);
  EXPECT_TRUE(std::isinf(CollectiveSeconds(*c, Collective::kAllReduce, 1, 16, 1e6)));
}

// Property: more NIC bandwidth never makes a collective slower, nor do faster
// intra-node links; more bytes never take less time.
TEST(GroupCostTest, MoreBandwidthIsNeverSlower) {
  for (const std::string& name : kClusterPresets) {
    const ClusterSpec base = MustCluster(name);
    ClusterSpec more_nic = base;
    more_nic.nic_GBps *= 1.5;
    ClusterSpec more_intra = base;
    more_intra.intra_node_GBps *= 1.5;
    for (auto& row : more_intra.link_GBps) {
      for (double& v : row) v *= 1.5;
    }
    for (auto& e : more_intra.intra_node_table) e.busbw_GBps *= 1.5;
    const int total = 16 * base.gpus_per_node;
    for (Collective coll : kAllCollectives) {
      for (int stride : Divisors(total)) {
        for (int size : Divisors(total)) {
          if (size < 2) continue;
          const double t = CollectiveSeconds(base, coll, stride, size, 64e6);
          EXPECT_LE(CollectiveSeconds(more_nic, coll, stride, size, 64e6), t)
              << name << " " << CollectiveName(coll) << " s=" << stride << " p=" << size;
          EXPECT_LE(CollectiveSeconds(more_intra, coll, stride, size, 64e6), t)
              << name << " " << CollectiveName(coll) << " s=" << stride << " p=" << size;
          EXPECT_LE(t, CollectiveSeconds(base, coll, stride, size, 128e6));
        }
      }
    }
  }
}

TEST(GroupCostTableTest, AgreesWithGroupCost) {
  for (const std::string& name : kClusterPresets) {
    const ClusterSpec c = MustCluster(name);
    for (int total : {64, 96}) {
      const GroupCostTable table(c, total);
      EXPECT_EQ(table.total_gpus(), total);
      for (Collective coll : kAllCollectives) {
        for (int stride : Divisors(total)) {
          for (int size : Divisors(total)) {
            if (size < 2) {
              EXPECT_DOUBLE_EQ(table.Seconds(coll, stride, size, 1e9), 0.0);
              continue;
            }
            const LinkCost want = GroupCost(c, coll, stride, size);
            const LinkCost& got = table.Get(coll, stride, size);
            EXPECT_EQ(got.tier, want.tier) << name << " s=" << stride << " p=" << size;
            EXPECT_EQ(got.alpha_us, want.alpha_us) << name << " s=" << stride << " p=" << size;
            EXPECT_EQ(got.busbw_GBps, want.busbw_GBps) << name << " s=" << stride << " p=" << size;
            EXPECT_EQ(table.Seconds(coll, stride, size, 3e8),
                      CollectiveSeconds(c, coll, stride, size, 3e8));
          }
        }
      }
    }
  }
}

// Node-local sizes need not divide the GPU count (ZeRO++ hpZ groups, pairs).
TEST(GroupCostTableTest, NodeLocalSizesAreTabulated) {
  const ClusterSpec c = MustCluster("dgx-h100");
  const GroupCostTable table(c, 12);
  for (int size = 2; size <= 8; ++size) {
    EXPECT_EQ(table.Get(Collective::kAllGather, 1, size).busbw_GBps,
              GroupCost(c, Collective::kAllGather, 1, size).busbw_GBps)
        << size;
  }
  const GroupCostTable odd(c, 9);
  EXPECT_EQ(odd.Get(Collective::kSendRecv, 3, 2).busbw_GBps,
            GroupCost(c, Collective::kSendRecv, 3, 2).busbw_GBps);
}

// An inline cluster naming only a GPU takes that GPU's usual node
// (docs/presets.md): 8 GPUs on NVSwitch, one 400 Gb/s (Hopper) or 200 Gb/s
// (Ampere) NIC per GPU.
TEST(ClusterSpecTest, GpuOnlyFormTakesTheUsualNode) {
  Result<ClusterSpec> h = ParseClusterSpec(Json::parse(R"({"gpu": "h100-sxm"})"), "/cluster");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->gpus_per_node, 8);
  EXPECT_EQ(h->intra_node_fabric, "nvswitch");
  EXPECT_EQ(h->nics_per_node, 8);
  EXPECT_DOUBLE_EQ(h->nic_GBps, 50.0);  // 400 Gb/s
  Result<ClusterSpec> a = ParseClusterSpec(Json::parse(R"({"gpu": "a100-40gb"})"), "/cluster");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_DOUBLE_EQ(a->nic_GBps, 25.0);  // 200 Gb/s
  EXPECT_EQ(a->gpu.name, "a100-40gb");
  for (auto [gpu, node] : {std::pair{"b200", "dgx-b200"},
                           {"gb200", "gb200-nvl72"},
                           {"gb300", "gb300-nvl72"},
                           {"h800", "hgx-h800"},
                           {"mi355x", "mi355x"}}) {
    Result<ClusterSpec> c =
        ParseClusterSpec(Json::parse(std::string(R"({"gpu": ")") + gpu + "\"}"), "/cluster");
    ASSERT_TRUE(c.ok()) << gpu << ": " << c.status().ToString();
    EXPECT_EQ(c->name, node);
  }
  // Unknown keys still fail, naming the field.
  Result<ClusterSpec> bad =
      ParseClusterSpec(Json::parse(R"({"gpu": "h100-sxm", "nics": 4})"), "/cluster");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("/cluster/nics"), std::string::npos);
}

// gpu_memory_GiB overrides the preset's capacity in every object form.
TEST(ClusterSpecTest, GpuMemoryOverride) {
  Result<ClusterSpec> c =
      ParseClusterSpec(Json::parse(R"({"gpu": "h100-sxm", "gpu_memory_GiB": 89.4})"), "/cluster");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_DOUBLE_EQ(c->gpu.memory_GiB, 89.4);
  Result<ClusterSpec> r = ParseClusterSpec(
      Json::parse(R"({"gpu": "h100-sxm", "gpus_per_node": 8, "intra_node_GBps": 370,
                     "inter_node_GBps_per_gpu": 46, "gpu_memory_GiB": 93})"),
      "/cluster");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_DOUBLE_EQ(r->gpu.memory_GiB, 93.0);
  Result<ClusterSpec> neg =
      ParseClusterSpec(Json::parse(R"({"gpu": "h100-sxm", "gpu_memory_GiB": -1})"), "/cluster");
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.status().message().find("/cluster/gpu_memory_GiB"), std::string::npos);
}

// Issue 40 (8): every number of a cluster object has a range, refused by its
// pointer with the range; the ends of each range are accepted.
TEST(ClusterSpecTest, NumbersOutsideTheirRangesAreRefusedByName) {
  struct Case {
    std::string base;  // preset whose canonical JSON is edited
    std::vector<std::string> path;
    Json value;
    std::string expected;  // "" = accepted
  };
  const std::vector<Case> cases = {
      {"dgx-h100", {"intra_node_GBps"}, 1e-300,
       "/cluster/intra_node_GBps: must be 0 (not stated: mesh and pcie fabrics) or in [0.01, "
       "100000] GB/s (got 1e-300)"},
      {"dgx-h100", {"intra_node_GBps"}, 1e308, "/cluster/intra_node_GBps: must be 0"},
      {"dgx-h100", {"intra_node_GBps"}, 0.01, ""},
      {"dgx-h100", {"intra_node_GBps"}, 1e5, ""},
      {"dgx-h100", {"nic_GBps"}, 1e308, "/cluster/nic_GBps: must be in [0.01, 100000] GB/s"},
      {"dgx-h100", {"nic_GBps"}, 1e-300, "/cluster/nic_GBps: must be in [0.01, 100000] GB/s"},
      {"dgx-h100", {"nic_GBps"}, 0.01, ""},
      {"dgx-h100", {"nics_per_node"}, -1, "/cluster/nics_per_node: must be in [0, 1024]"},
      {"dgx-h100", {"intra_alpha_us"}, 1e308, "/cluster/intra_alpha_us: must be in [0, 10000] µs"},
      {"dgx-h100", {"inter_alpha_us"}, -1, "/cluster/inter_alpha_us: must be in [0, 10000] µs"},
      {"dgx-h100", {"inter_alpha_us"}, 1e4, ""},
      {"dgx-h100", {"inter_alpha_us"}, 0, ""},
      {"dgx-h100", {"max_nodes"}, 16777217, "/cluster/max_nodes: must be in [0, 16777216]"},
      {"dgx-h100", {"max_nodes"}, 16777216, ""},
      {"dgx-h100", {"host_memory_GiB"}, 1e308, "/cluster/host_memory_GiB: must be 0 (not stated)"},
      {"dgx-h100", {"host_memory_GiB"}, 65536, ""},
      {"dgx-h100", {"host_memory_GBps"}, 1e-300, "/cluster/host_memory_GBps: must be 0"},
      {"dgx-h100", {"host_link_GBps"}, 2e5, "/cluster/host_link_GBps: must be 0"},
      {"dgx-h100", {"gpu_memory_GiB"}, 1e308, "/cluster/gpu_memory_GiB: must be in (0, 4096]"},
      {"dgx-h100", {"gpu", "memory_GiB"}, 1e308, "/cluster/gpu/memory_GiB: must be in (0, 4096]"},
      {"dgx-h100", {"gpu", "peak_tflops", "bf16"}, 1e308, "/cluster/gpu/peak_tflops/bf16"},
      {"perlmutter", {"link_GBps", "0", "1"}, 1e-300,
       "/cluster/link_GBps/0/1: must be 0 (no link) or in [0.01, 100000] GB/s"},
      {"perlmutter", {"link_GBps", "0", "1"}, 1e308, "/cluster/link_GBps/0/1: must be 0"},
      {"perlmutter", {"intra_node_table", "0", "busbw_GBps"}, 1e-300,
       "/cluster/intra_node_table/0/busbw_GBps: must be in [0.01, 100000] GB/s"},
      {"perlmutter", {"fits"}, Json::parse(R"([{"collective": "all_reduce", "tier": "inter_node",
        "group_size": 8, "alpha_us": 1e308, "busbw_GBps": 20}])"),
       "/cluster/fits/0/alpha_us: must be in [0, 10000] µs"},
      {"perlmutter", {"fits"}, Json::parse(R"([{"collective": "all_reduce", "tier": "inter_node",
        "group_size": 8, "alpha_us": 10, "busbw_GBps": 1e-300}])"),
       "/cluster/fits/0/busbw_GBps: must be in [0.01, 100000] GB/s"},
  };
  for (const Case& c : cases) {
    const Json j = SetAt(ClusterSpecToJson(MustCluster(c.base)), c.path, c.value);
    ExpectRangeVerdict(ParseClusterSpec(j, "/cluster").status(),
                       c.path.back() + " = " + c.value.dump(), c.expected);
  }
  // The request form's two bandwidths.
  const Json req = MustParse(R"({"gpu": "h100-sxm", "gpus_per_node": 8, "intra_node_GBps": 370,
    "inter_node_GBps_per_gpu": 50})");
  for (const auto& [key, value, expected] :
       std::vector<std::tuple<std::string, double, std::string>>{
           {"intra_node_GBps", 1e-300, "/cluster/intra_node_GBps: must be in [0.01, 100000] GB/s"},
           {"intra_node_GBps", 0, "/cluster/intra_node_GBps: must be in [0.01, 100000] GB/s"},
           {"inter_node_GBps_per_gpu", 1e-300,
            "/cluster/inter_node_GBps_per_gpu: must be 0 (no network: one node) or in [0.01"},
           {"inter_node_GBps_per_gpu", 1e308, "/cluster/inter_node_GBps_per_gpu: must be 0"},
           {"intra_node_GBps", 0.01, ""},
           {"inter_node_GBps_per_gpu", 1e5, ""}}) {
    Json j = req;
    j[key] = value;
    Result<ClusterSpec> r = ParseClusterSpec(j, "/cluster");
    if (expected.empty()) {
      EXPECT_TRUE(r.ok()) << key << ": " << r.status().ToString();
    } else {
      ASSERT_FALSE(r.ok()) << key << " = " << value;
      EXPECT_NE(r.status().message().find(expected), std::string::npos) << r.status().message();
    }
  }
}

// Issue 40 (8): nics_per_node 0 answered a two-node job with null times. A
// cluster without a NIC is one node (or one NVLink domain): max_nodes 0 becomes
// that, and a larger max_nodes is refused.
TEST(ClusterSpecTest, NoNicMeansOneNodeOrOneDomain) {
  Json box = MustParse(R"({"name": "box", "gpu": "h100-sxm", "gpus_per_node": 8,
    "intra_node_GBps": 370, "nics_per_node": 0})");
  Result<ClusterSpec> one = ParseClusterSpec(box, "/cluster");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->max_nodes, 1);
  box["max_nodes"] = 1;
  EXPECT_TRUE(ParseClusterSpec(box, "/cluster").ok());
  box["max_nodes"] = 4;
  Result<ClusterSpec> four = ParseClusterSpec(box, "/cluster");
  ASSERT_FALSE(four.ok());
  EXPECT_EQ(four.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(four.status().message().find(
                "/cluster/nics_per_node: must be >= 1 for a cluster of more than one node "
                "(max_nodes 4)"),
            std::string::npos)
      << four.status().message();
  // A rack-scale NVLink domain without NICs still spans its trays.
  Json rack = ClusterSpecToJson(MustCluster("gb200-nvl72"));
  rack["nics_per_node"] = 0;
  rack["max_nodes"] = 0;
  rack.erase("nic_GBps");
  Result<ClusterSpec> r = ParseClusterSpec(rack, "/cluster");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->max_nodes, r->DomainGpus() / r->gpus_per_node);
  rack["max_nodes"] = r->max_nodes + 1;
  EXPECT_NE(ParseClusterSpec(rack, "/cluster").status().message().find("one NVLink domain"),
            std::string::npos);
  // The request form says "no network" with inter_node_GBps_per_gpu 0.
  Json req = MustParse(R"({"gpu": "h100-sxm", "gpus_per_node": 8, "intra_node_GBps": 370,
    "inter_node_GBps_per_gpu": 0})");
  Result<ClusterSpec> q = ParseClusterSpec(req, "/cluster");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->max_nodes, 1);
  req["max_nodes"] = 2;
  EXPECT_NE(ParseClusterSpec(req, "/cluster")
                .status()
                .message()
                .find("/cluster/inter_node_GBps_per_gpu: must be positive for a cluster of more "
                      "than one node"),
            std::string::npos);
}

}  // namespace
}  // namespace paratune::topology
