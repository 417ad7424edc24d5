// The names of the workload's enums and the plan's rank geometry: each rank's
// coordinates, the members and stride of each of its groups, which groups a
// configuration has, and the ranks that represent every distinct role.
#include <algorithm>
#include <iterator>

#include "common/enum_names.h"
#include "executor/run/workload.h"

namespace paratune::executor {

using planner::Dim;
using planner::ParallelConfig;

namespace {
// By value, in the order of each enum's declaration (workload.h).
constexpr const char* kCategoryNames[] = {"compute", "comm_x",    "comm_y",  "comm_z",
                                          "comm_cp", "comm_data", "comm_pp", "optimizer"};
static_assert(std::size(kCategoryNames) == kNumCategories);
constexpr const char* kScopeNames[] = {"layer", "stage", "step"};
constexpr const char* kPhaseNames[] = {"fwd", "recompute", "bwd", "step"};
constexpr const char* kGroupKindNames[] = {"x",    "y",         "z",          "cp",
                                           "pp",   "data",      "data_node",  "expert_data"};
static_assert(std::size(kGroupKindNames) == kNumGroupKinds);
constexpr const char* kStreamRoleNames[] = {"compute", "tensor_comm", "depth_comm", "context_comm",
                                            "data_comm"};
static_assert(std::size(kStreamRoleNames) == kNumStreamRoles);
}  // namespace

const char* CategoryName(Category c) { return EnumName(c, kCategoryNames); }
const char* ScopeName(Scope s) { return EnumName(s, kScopeNames); }
const char* PhaseName(Phase p) { return EnumName(p, kPhaseNames); }
const char* GroupKindName(GroupKind g) { return EnumName(g, kGroupKindNames); }
const char* StreamRoleName(StreamRole r) { return EnumName(r, kStreamRoleNames); }

const Group* Workload::FindGroup(GroupKind kind) const {
  for (const Group& g : groups) {
    if (g.kind == kind) return &g;
  }
  return nullptr;
}

std::array<int, planner::kNumDims> Coordinates(const ParallelConfig& c, int rank) {
  PT_CHECK(rank >= 0 && rank < c.world());
  std::array<int, planner::kNumDims> out{};
  for (int i = 0; i < planner::kNumDims; ++i) {
    const Dim d = static_cast<Dim>(i);
    out[static_cast<size_t>(i)] = (rank / c.Stride(d)) % c.Degree(d);
  }
  return out;
}

int RankOf(const ParallelConfig& c, const std::array<int, planner::kNumDims>& coords) {
  int r = 0;
  for (int i = 0; i < planner::kNumDims; ++i) {
    const Dim d = static_cast<Dim>(i);
    PT_CHECK(coords[static_cast<size_t>(i)] >= 0 && coords[static_cast<size_t>(i)] < c.Degree(d));
    r += coords[static_cast<size_t>(i)] * c.Stride(d);
  }
  return r;
}

std::vector<int> GroupRanks(const ParallelConfig& c, GroupKind kind, int rank, int gpus_per_node) {
  PT_CHECK(gpus_per_node >= 1);
  const auto me = Coordinates(c, rank);
  auto vary = [&](Dim d) {
    std::vector<int> out;
    auto co = me;
    for (int i = 0; i < c.Degree(d); ++i) {
      co[DimSlot(d)] = i;
      out.push_back(RankOf(c, co));
    }
    return out;
  };
  switch (kind) {
    case GroupKind::kX:
      return vary(Dim::kX);
    case GroupKind::kY:
      return vary(Dim::kY);
    case GroupKind::kZ:
      return vary(Dim::kZ);
    case GroupKind::kCp:
      return vary(Dim::kCp);
    case GroupKind::kPp:
      return vary(Dim::kPp);
    case GroupKind::kData:
    case GroupKind::kDataNode: {
      // Data × cp, the inner dimension varying fastest.
      const bool cp_inner = c.Stride(Dim::kCp) < c.Stride(Dim::kData);
      const Dim inner = cp_inner ? Dim::kCp : Dim::kData;
      const Dim outer = cp_inner ? Dim::kData : Dim::kCp;
      std::vector<int> out;
      auto co = me;
      for (int o = 0; o < c.Degree(outer); ++o) {
        for (int i = 0; i < c.Degree(inner); ++i) {
          co[DimSlot(outer)] = o;
          co[DimSlot(inner)] = i;
          out.push_back(RankOf(c, co));
        }
      }
      if (kind == GroupKind::kDataNode) {
        const int node = rank / gpus_per_node;
        std::vector<int> local;
        for (int r : out) {
          if (r / gpus_per_node == node) local.push_back(r);
        }
        return local;
      }
      return out;
    }
    case GroupKind::kExpertData: {
      // The stage's ranks in rank order, every ep·etp-th from this rank's place.
      std::vector<int> stage;
      for (int r = 0; r < c.world(); ++r) {
        if (Coordinates(c, r)[DimSlot(Dim::kPp)] == me[DimSlot(Dim::kPp)]) stage.push_back(r);
      }
      const size_t width = static_cast<size_t>(std::max(1, c.ep * c.etp));
      const size_t pos = static_cast<size_t>(
          std::find(stage.begin(), stage.end(), rank) - stage.begin());
      std::vector<int> out;
      for (size_t i = pos % width; i < stage.size(); i += width) out.push_back(stage[i]);
      return out;
    }
  }
  return {rank};
}

int GroupStride(const ParallelConfig& c, GroupKind kind) {
  switch (kind) {
    case GroupKind::kX:
      return c.Stride(Dim::kX);
    case GroupKind::kY:
      return c.Stride(Dim::kY);
    case GroupKind::kZ:
      return c.Stride(Dim::kZ);
    case GroupKind::kCp:
      return c.Stride(Dim::kCp);
    case GroupKind::kPp:
      return c.Stride(Dim::kPp);
    case GroupKind::kData:
    case GroupKind::kDataNode:
      if (c.cp == 1) return c.Stride(Dim::kData);
      if (c.gdata == 1) return c.Stride(Dim::kCp);
      return std::min(c.Stride(Dim::kData), c.Stride(Dim::kCp));
    case GroupKind::kExpertData: {
      const std::vector<int> g = GroupRanks(c, kind, 0, 1);
      return g.size() > 1 ? g[1] - g[0] : 1;
    }
  }
  return 1;
}

std::vector<GroupKind> GroupKindsOf(const ParallelConfig& c, int gpus_per_node) {
  std::vector<GroupKind> out;
  if (c.gx > 1) out.push_back(GroupKind::kX);
  if (c.gy > 1) out.push_back(GroupKind::kY);
  if (c.gz > 1) out.push_back(GroupKind::kZ);
  if (c.cp > 1) out.push_back(GroupKind::kCp);
  if (c.pp > 1) out.push_back(GroupKind::kPp);
  const int nd = c.gdata * c.cp;
  if (nd > 1) out.push_back(GroupKind::kData);
  if (c.zero == 3 && c.hpz && nd > 1) {
    const size_t local = GroupRanks(c, GroupKind::kDataNode, 0, gpus_per_node).size();
    if (local > 1 && local < static_cast<size_t>(nd)) out.push_back(GroupKind::kDataNode);
  }
  if (c.ep * c.etp > 1 && c.expert_data() > 1) out.push_back(GroupKind::kExpertData);
  return out;
}

std::vector<int> RepresentativeRanks(const ParallelConfig& c) {
  std::vector<int> stages = {0};
  if (c.pp >= 3) stages.push_back(1);
  if (c.pp >= 2) stages.push_back(c.pp - 1);
  std::vector<int> out;
  for (int s : stages) {
    std::array<int, planner::kNumDims> co{};
    co[DimSlot(Dim::kPp)] = s;
    out.push_back(RankOf(c, co));
  }
  return out;
}

}  // namespace paratune::executor
