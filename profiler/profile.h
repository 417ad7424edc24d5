// profiler/profile.h: the machine profile ("schema": "paratune.profile/v1"),
// the document the planner reads for `--profile FILE` or finds in the cache.
// It holds α-β fits per collective × tier × group size with the samples they
// came from, GEMM efficiency curves per precision with their samples, the
// fingerprint of the cluster description it belongs to, and the environment it
// was measured in (docs/profiler.md has the full schema).
//
// BuildProfile fits measurements; ProfileToJson / ParseProfile convert (the
// parser is strict: unknown or missing keys are errors with a JSON pointer);
// ApplyProfile merges a profile into a ClusterSpec for the planner.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "profiler/fit.h"
#include "profiler/measurements.h"
#include "topology/cluster.h"
#include "topology/gpu.h"

namespace paratune::profiler {

inline constexpr const char* kProfileSchema = "paratune.profile/v1";

// A sample as the profile keeps it (one nccl-tests row).
struct ProfileSample {
  int64_t size_bytes = 0;
  double time_us = 0;
  double algbw_GBps = 0;
  double busbw_GBps = 0;
};

struct CollectiveEntry {
  topology::Collective collective = topology::Collective::kAllReduce;
  int group_size = 2;
  int stride = 1;
  // Group instances that shared one node's NICs while this was measured; the
  // inter-node β is per instance under that sharing (nccl-tests reports per group).
  int concurrent_groups = 1;
  topology::Tier tier = topology::Tier::kIntraNode;
  std::string dtype = "float";
  double alpha_us = 0;   // per rank in the group, µs: t = alpha_us·p + bus_bytes/β
  double beta_GBps = 0;  // fitted bus bandwidth, GB/s
  double residual = 0;   // RMS relative error of the fit
  std::vector<ProfileSample> samples;
};

struct GemmSample {
  int64_t m = 0, n = 0, k = 0;
  double time_us = 0;
  double tflops = 0;
  double efficiency = 0;  // tflops / peak_tflops
};

struct GemmEntry {
  topology::Precision precision = topology::Precision::kBf16;
  double peak_tflops = 0;   // the peak the efficiencies are relative to
  std::string peak_source;  // "gpu preset h100-sxm" | "largest measured rate" | …
  double saturation_efficiency = 0;
  double size_half = 0;
  double gamma = 0;
  double residual = 0;
  std::vector<topology::EfficiencyPoint> curve;  // ascending sizes, efficiency in (0, 1]
  std::vector<GemmSample> samples;
};

struct Profile {
  std::string cluster_fingerprint;  // topology::Fingerprint of `cluster`; "" = not tied to one
  Environment environment;
  std::optional<topology::ClusterSpec> cluster;  // the description it was measured on
  std::vector<CollectiveEntry> collectives;
  std::vector<GemmEntry> gemm;
  std::optional<CopyResult> copy;
  std::optional<P2PMatrix> p2p;
  std::vector<Waived> waived;
  // Written by `paratune calibrate` (executor/run/calibrate.h): the fitted
  // factors under "compute", "communication", "memory_bound" plus its own
  // bookkeeping, kept verbatim. ApplyProfile copies the factors into
  // ClusterSpec::corrections; its optional "entries" (per framework x GPU,
  // from training logs) go to ClusterSpec::framework_corrections.
  std::optional<Json> calibration;
};

// What a GEMM curve's efficiencies are relative to, per precision: the base
// cluster's GPU peak where it has one, else the largest rate measured.
struct PeakTable {
  std::array<double, topology::kNumPrecisions> tflops{};  // 0 = unknown
  std::string source;                                     // e.g. "gpu preset h100-sxm"
};

// Fits every series and GEMM series of `m`. A series that cannot be fitted
// (one size, all latency-bound) is left out and explained in `warnings`; it is
// an error only when nothing at all could be fitted. `cluster` (optional) is
// embedded and fingerprinted.
Result<Profile> BuildProfile(const Measurements& m,
                             const std::optional<topology::ClusterSpec>& cluster,
                             const PeakTable& peaks, std::vector<std::string>* warnings);

OrderedJson ProfileToJson(const Profile& p);
Result<Profile> ParseProfile(const Json& j);
// Reads and parses a profile file; errors name the file.
Result<Profile> LoadProfile(const std::string& path);
// Writes `p` to `path` atomically (temp file + rename).
Status WriteProfile(const Profile& p, const std::string& path);

// A stable 16-hex-digit identity of the profile's content (what the planner
// reports as "profile used").
std::string ProfileFingerprint(const Profile& p);

// Merges `profile` into `cluster` for the planner:
//  - each collective entry becomes a CollectiveFit (one per collective × tier ×
//    group size; where several strides were measured the smallest stride wins),
//    replacing a fit with the same key; inter-node bandwidth is scaled back to
//    one group instance (× concurrent_groups), as GroupCost divides it again;
//  - each measured GEMM curve replaces the GPU's curve for that precision,
//    re-expressed against the cluster GPU's peak (its peak is taken from the
//    profile where the cluster has none);
//  - cluster->profile_fingerprint = ProfileFingerprint(profile).
//  - the calibration's per framework x GPU "entries" (`paratune calibrate
//    --logs`) replace the cluster's framework_corrections of the same key;
// Fails (kInvalidArgument) when the profile has neither fits nor curves nor a
// calibration (a profile written from training logs alone has only that), or
// when its measured GEMM rate exceeds the cluster GPU's peak (another GPU).
Status ApplyProfile(const Profile& profile, topology::ClusterSpec* cluster);

}  // namespace paratune::profiler
