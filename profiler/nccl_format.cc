#include "profiler/nccl_format.h"

#include <algorithm>
#include <cstdio>

#include "common/strings.h"

namespace paratune::profiler {

using topology::Collective;

Result<SizeSweep> ParseSweep(const SizeSweep& base, const std::string& min_bytes,
                             const std::string& max_bytes, const std::string& step_factor,
                             const std::string& step_bytes) {
  SizeSweep s = base;
  if (!min_bytes.empty()) {
    auto v = ParseSizeBytes(min_bytes);
    if (!v.ok()) return v.status().WithContext("-b/--minbytes");
    s.min_bytes = *v;
  }
  if (!max_bytes.empty()) {
    auto v = ParseSizeBytes(max_bytes);
    if (!v.ok()) return v.status().WithContext("-e/--maxbytes");
    s.max_bytes = *v;
  }
  if (!step_factor.empty()) {
    PT_ASSIGN_OR_RETURN(int64_t f, ParseInt(step_factor, "-f/--stepfactor"));
    s.step_factor = f;
    if (step_bytes.empty()) s.step_bytes = 0;
  }
  if (!step_bytes.empty()) {
    auto v = ParseSizeBytes(step_bytes);
    if (!v.ok()) return v.status().WithContext("-i/--stepbytes");
    s.step_bytes = *v;
    if (step_factor.empty()) s.step_factor = 1;
  }
  if (s.min_bytes < 1) return Status::InvalidArgument("-b/--minbytes must be at least 1 byte");
  if (s.min_bytes > s.max_bytes) {
    return Status::InvalidArgument("-b/--minbytes (" + std::to_string(s.min_bytes) +
                                   ") is larger than -e/--maxbytes (" +
                                   std::to_string(s.max_bytes) + ")");
  }
  if (s.step_factor <= 1 && s.step_bytes <= 0 && s.min_bytes != s.max_bytes) {
    return Status::InvalidArgument("the sweep needs -f > 1 or -i > 0");
  }
  return s;
}

Result<std::vector<int64_t>> SweepSizes(const SizeSweep& s) {
  std::vector<int64_t> sizes;
  constexpr size_t kMaxSizes = 4096;
  for (int64_t size = s.min_bytes; size <= s.max_bytes;) {
    sizes.push_back(size);
    if (sizes.size() > kMaxSizes) {
      return Status::InvalidArgument("the sweep visits more than 4096 sizes; raise -f or -i");
    }
    const int64_t next = s.step_factor > 1 ? size * s.step_factor : size + s.step_bytes;
    if (next <= size) break;  // min == max, or overflow
    size = next;
  }
  return sizes;
}

RowCounts CountsFor(Collective c, int64_t size_bytes, int elem_bytes, int group_size) {
  PT_CHECK(elem_bytes >= 1 && group_size >= 1);
  const int64_t n = group_size;
  const int64_t elems = size_bytes / elem_bytes;
  RowCounts r;
  switch (c) {
    case Collective::kAllReduce:
    case Collective::kSendRecv:
      r.count = elems;
      r.send_bytes = r.recv_bytes = elems * elem_bytes;
      break;
    case Collective::kAllGather:
      r.count = elems / n;  // per-rank chunk
      r.send_bytes = r.count * elem_bytes;
      r.recv_bytes = r.count * n * elem_bytes;
      break;
    case Collective::kReduceScatter:
      r.count = elems / n;
      r.send_bytes = r.count * n * elem_bytes;
      r.recv_bytes = r.count * elem_bytes;
      break;
    case Collective::kAllToAll:
      r.count = elems / n;  // per peer
      r.send_bytes = r.recv_bytes = r.count * n * elem_bytes;
      break;
  }
  r.size_bytes = std::max(r.send_bytes, r.recv_bytes);
  return r;
}

double AlgBwGBps(int64_t size_bytes, double time_us) {
  if (!(time_us > 0)) return 0.0;
  return static_cast<double>(size_bytes) / time_us / 1e3;
}

double BusBwGBps(Collective c, int group_size, double algbw_GBps) {
  return algbw_GBps * topology::BusFactor(c, group_size);
}

std::string FloatStr(double value, int width) {
  // Same decision ladder as nccl-tests' getFloatStr (src/util.cu).
  int power = 0;
  for (uint64_t val = 1; value >= static_cast<double>(val) && power < 20; val *= 10) power++;
  char buf[64];
  if (power < width - 2) {
    std::snprintf(buf, sizeof buf, "%*.2f", width, value);
  } else if (power < width - 1) {
    std::snprintf(buf, sizeof buf, "%*.1f", width, value);
  } else if (power < width + 1) {
    std::snprintf(buf, sizeof buf, "%*.0f", width, value);
  } else if (width >= 7) {
    std::snprintf(buf, sizeof buf, "%*.1e", width, value);
  } else {
    std::snprintf(buf, sizeof buf, "%*.0e", width, value);
  }
  return buf;
}

std::string FormatTableHeader() {
  char a[256], b[256];
  std::snprintf(a, sizeof a, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count",
                "type", "redop", "root", "time", "algbw", "busbw", "#wrong");
  std::snprintf(b, sizeof b, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)",
                "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "");
  return std::string(a) + b;
}

std::string FormatRow(const ReportRow& r) {
  char head[128];
  char root[16];
  std::snprintf(root, sizeof root, "%6i", r.root);
  std::snprintf(head, sizeof head, "%12lli  %12lli  %8s  %6s  %6s",
                static_cast<long long>(r.size_bytes), static_cast<long long>(r.count),
                r.type.c_str(), r.redop.c_str(), root);
  std::string line = head;
  char body[128];
  if (r.wrong >= 0) {
    std::snprintf(body, sizeof body, "  %7s  %6s  %6s  %6g", FloatStr(r.time_us, 7).c_str(),
                  FloatStr(r.algbw_GBps, 6).c_str(), FloatStr(r.busbw_GBps, 6).c_str(),
                  static_cast<double>(r.wrong));
  } else {
    std::snprintf(body, sizeof body, "  %7s  %6s  %6s    N/A", FloatStr(r.time_us, 7).c_str(),
                  FloatStr(r.algbw_GBps, 6).c_str(), FloatStr(r.busbw_GBps, 6).c_str());
  }
  return line + body + "\n";
}

std::string RedopColumn(Collective c, const std::string& op) {
  return (c == Collective::kAllToAll || c == Collective::kSendRecv) ? "none" : op;
}

}  // namespace paratune::profiler
