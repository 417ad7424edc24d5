#include "elastic/expert_reshard.h"

#include <algorithm>
#include <string>

namespace paratune::planner {

ExpertCoords ExpertCoordsOf(const ExpertLayout& layout, int stage_rank) {
  ExpertCoords c;
  c.etp = stage_rank % layout.etp;
  c.ep = (stage_rank / layout.etp) % layout.ep;
  c.edp = stage_rank / (layout.etp * layout.ep);
  return c;
}

int64_t ExpertSliceParams(const ModelSpec& m, const ExpertSlice& s) {
  const int64_t w = s.f1 - s.f0;
  int64_t p = (m.gated_ffn ? 3 : 2) * int64_t{m.hidden} * w;
  if (m.linear_bias) {
    p += (m.gated_ffn ? 2 : 1) * w;
    if (s.f0 == 0) p += m.hidden;
  }
  return p;
}

Status CheckExpertLayout(const ModelSpec& m, const ExpertLayout& layout) {
  if (!m.is_moe()) {
    return Status::InvalidArgument("experts: the model has no routed experts to reshard");
  }
  if (layout.ep < 1) return Status::InvalidArgument("ep: must be at least 1");
  if (layout.etp < 1) return Status::InvalidArgument("etp: must be at least 1");
  if (layout.edp < 1) return Status::InvalidArgument("edp: must be at least 1");
  if (m.experts % layout.ep != 0) {
    return Status::InvalidArgument("ep: " + std::to_string(layout.ep) + " does not divide the " +
                                   std::to_string(m.experts) + " experts");
  }
  if (m.moe_ffn_hidden % layout.etp != 0) {
    return Status::InvalidArgument("etp: " + std::to_string(layout.etp) +
                                   " does not divide the expert width " +
                                   std::to_string(m.moe_ffn_hidden));
  }
  return Status::Ok();
}

std::vector<ExpertSlice> ExpertSlicesHeld(const ModelSpec& m, const ExpertLayout& layout,
                                          int stage_rank) {
  const ExpertCoords c = ExpertCoordsOf(layout, stage_rank);
  const int local = m.experts / layout.ep;
  const int64_t width = m.moe_ffn_hidden / layout.etp;
  std::vector<ExpertSlice> out;
  out.reserve(local);
  for (int e = c.ep * local; e < (c.ep + 1) * local; ++e) {
    out.push_back({e, c.etp * width, (c.etp + 1) * width});
  }
  return out;
}

namespace {

Status Prefixed(const Status& s, const char* prefix) {
  return s.ok() ? s : Status::InvalidArgument(std::string(prefix) + s.message());
}

}  // namespace

Result<ExpertReshardPlan> PlanExpertReshard(const ModelSpec& m, const ExpertLayout& from,
                                            const ExpertLayout& to) {
  PT_RETURN_IF_ERROR(Prefixed(CheckExpertLayout(m, from), "from."));
  PT_RETURN_IF_ERROR(Prefixed(CheckExpertLayout(m, to), "to."));
  ExpertReshardPlan plan;
  std::vector<int64_t> out_per_old(from.ranks(), 0);
  const int64_t old_width = m.moe_ffn_hidden / from.etp;
  const int old_local = m.experts / from.ep;
  for (int r = 0; r < to.ranks(); ++r) {
    const std::vector<ExpertSlice> kept =
        r < from.ranks() ? ExpertSlicesHeld(m, from, r) : std::vector<ExpertSlice>{};
    int64_t in = 0;
    for (const ExpertSlice& need : ExpertSlicesHeld(m, to, r)) {
      plan.params_needed += ExpertSliceParams(m, need);
      // The old slices of this expert that overlap the needed range: one per
      // old etp index, held by every old rank with that ep and etp index.
      const int old_ep = need.expert / old_local;
      for (int j = 0; j < from.etp; ++j) {
        const int64_t f0 = std::max(need.f0, j * old_width);
        const int64_t f1 = std::min(need.f1, (j + 1) * old_width);
        if (f1 <= f0) continue;
        const ExpertSlice piece{need.expert, f0, f1};
        const int64_t params = ExpertSliceParams(m, piece);
        const bool here = std::any_of(kept.begin(), kept.end(), [&](const ExpertSlice& k) {
          return k.expert == piece.expert && k.f0 <= f0 && f1 <= k.f1;
        });
        if (here) {
          plan.params_kept += params;
          continue;
        }
        // Holders: old ranks j + etp·(old_ep + ep·d) for every replica d.
        const int d = r % from.edp;
        const int src = j + from.etp * (old_ep + from.ep * d);
        plan.transfers.push_back({r, src, piece, params});
        out_per_old[src] += params;
        in += params;
      }
    }
    plan.params_moved += in;
    plan.max_rank_params_in = std::max(plan.max_rank_params_in, in);
  }
  for (int64_t o : out_per_old) plan.max_rank_params_out = std::max(plan.max_rank_params_out, o);
  return plan;
}

}  // namespace paratune::planner
