#include "profiler/report.h"

#include <cstdarg>
#include <cstdio>
#include <sstream>

#include "common/strings.h"
#include "profiler/nccl_format.h"
#include "profiler/sampler.h"

namespace paratune::profiler {
namespace {

std::string Printf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Printf(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

}  // namespace

std::string FormatCollectiveTables(const Measurements& m) {
  std::ostringstream out;
  for (const CollectiveSeries& s : m.collectives) {
    const std::string test = std::string(topology::CollectiveName(s.collective)) + "_perf";
    out << "# Collective test starting: " << test << "\n";
    out << "# paratune " << m.env.backend << ": " << s.groups << " group(s) of " << s.group_size
        << " ranks, stride " << s.stride << ", " << topology::TierName(s.tier) << ", "
        << s.concurrent_groups << " group(s) per node\n";
    out << "#\n# Using devices\n";
    if (static_cast<int>(m.env.hosts.size()) == m.env.world_size && s.origin == "measured") {
      const GroupShape shape{s.group_size, s.stride};
      for (int r = 0; r < m.env.world_size; ++r) {
        const GroupSlot slot = SlotFor(shape, m.env.world_size, r);
        if (slot.color < 0) continue;
        out << Printf("#  Rank %2d Group %2d on %10s device %2d [-] %s\n", r, slot.color,
                      m.env.hosts[static_cast<size_t>(r)].c_str(), r, m.env.device.c_str());
      }
    }
    out << "#\n" << FormatTableHeader();
    double sum = 0;
    for (const SeriesRow& r : s.rows) {
      out << FormatRow(ReportRow{.size_bytes = r.size_bytes,
                                 .count = r.count,
                                 .type = s.dtype,
                                 .redop = s.redop,
                                 .time_us = r.time_us,
                                 .algbw_GBps = r.algbw_GBps,
                                 .busbw_GBps = r.busbw_GBps,
                                 .wrong = r.wrong});
      sum += r.busbw_GBps;
    }
    out << Printf("# %-20s : %g\n", "Avg bus bandwidth",
                  s.rows.empty() ? 0.0 : sum / s.rows.size());
    out << "#\n# Collective test concluded: " << test << "\n\n";
  }
  return out.str();
}

std::string FormatFits(const Profile& p) {
  std::ostringstream out;
  if (!p.collectives.empty()) {
    out << "# α-β fits: t = alpha_us·p + busfactor·size/beta (residual: RMS relative error)\n";
    out << Printf("# %-15s %6s %6s %10s %10s %12s %9s %7s\n", "collective", "ranks", "stride",
                  "tier", "alpha(us)", "beta(GB/s)", "residual", "samples");
    for (const CollectiveEntry& e : p.collectives) {
      out << Printf("  %-15s %6d %6d %10s %10.3f %12.3f %8.1f%% %7zu\n",
                    topology::CollectiveName(e.collective), e.group_size, e.stride,
                    topology::TierName(e.tier), e.alpha_us, e.beta_GBps, 100 * e.residual,
                    e.samples.size());
    }
  }
  for (const GemmEntry& g : p.gemm) {
    out << "# GEMM " << topology::PrecisionName(g.precision)
        << ": efficiency(s) = " << FormatFixed(g.saturation_efficiency, 3);
    if (g.size_half > 0) {
      out << " / (1 + (" << FormatFixed(g.size_half, 0) << "/s)^" << FormatFixed(g.gamma, 2) << ")";
    } else {
      out << " (flat: no rise with size measured)";
    }
    out << " of " << FormatFixed(g.peak_tflops, 2) << " TFLOP/s (" << g.peak_source
        << "), residual " << FormatFixed(100 * g.residual, 1) << "%\n";
    out << Printf("# %8s %8s %8s %12s %10s %10s\n", "m", "n", "k", "time(us)", "TFLOP/s", "eff");
    for (const GemmSample& s : g.samples) {
      out << Printf("  %8lld %8lld %8lld %12.2f %10.3f %10.3f\n", static_cast<long long>(s.m),
                    static_cast<long long>(s.n), static_cast<long long>(s.k), s.time_us, s.tflops,
                    s.efficiency);
    }
  }
  return out.str();
}

std::string FormatReport(const Measurements& m, const Profile* profile) {
  std::ostringstream out;
  out << "# paratune profile (" << m.env.tool << ", backend " << m.env.backend << ", "
      << m.env.world_size << " rank(s) on " << m.env.nodes << " node(s), " << m.env.device << ", "
      << m.env.created_at << ")\n";
  for (const auto& [k, v] : m.env.versions) out << "# version " << k << ": " << v << "\n";
  out << "#\n" << FormatCollectiveTables(m);
  if (profile) out << FormatFits(*profile) << "\n";
  if (!profile) {
    for (const GemmSeries& g : m.gemm) {
      out << "# GEMM " << topology::PrecisionName(g.precision) << "\n";
      for (const GemmRow& r : g.rows) {
        out << Printf("  %8lld %8lld %8lld %12.2f us %10.3f TFLOP/s\n", static_cast<long long>(r.m),
                      static_cast<long long>(r.n), static_cast<long long>(r.k), r.time_us,
                      r.tflops);
      }
    }
  }
  if (m.copy) {
    out << "# device copy: " << m.copy->bytes << " B in " << FormatFixed(m.copy->time_us, 1)
        << " us = " << FormatFixed(m.copy->GBps, 1) << " GB/s (bytes read + written)\n";
  }
  if (m.p2p) {
    out << "# P2P unidirectional bandwidth (GB/s), row -> column, " << m.p2p->bytes << " B\n";
    out << Printf("%8s", "");
    for (int r : m.p2p->ranks) out << Printf("%9d", r);
    out << "\n";
    for (size_t i = 0; i < m.p2p->ranks.size(); ++i) {
      out << Printf("%8d", m.p2p->ranks[i]);
      for (size_t j = 0; j < m.p2p->ranks.size(); ++j) {
        if (i == j)
          out << Printf("%9s", "N/A");
        else
          out << Printf("%9.2f", m.p2p->GBps[i][j]);
      }
      out << "\n";
    }
  }
  for (const Waived& w : m.waived) out << "# WAIVED " << w.what << ": " << w.reason << "\n";
  return out.str();
}

}  // namespace paratune::profiler
