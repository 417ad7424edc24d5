// profiler/discovery.h: what the allocation is made of, before anything is
// measured: hosts and ranks per host (from the backend's bootstrap), the
// device (CUDA properties or the CPU), the NVLink/PCIe wiring of rank 0's host
// (NVML, when the driver is there), and its InfiniBand NICs (sysfs). From it,
// a cluster description the planner accepts (paratune.cluster/v1), built only
// from fixed properties of the hardware so that its fingerprint — the cache
// key of profiles — is the same on every run on the same machines.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/nvml_topology.h"
#include "profiler/profile.h"
#include "topology/cluster.h"

namespace paratune::profiler {

struct NicInfo {
  std::string name;      // "mlx5_0:1" (device:port)
  double rate_Gbps = 0;  // line rate, Gb/s
};

// Active InfiniBand/RoCE ports under `sysfs_root` (/sys/class/infiniband): each
// <dev>/ports/<n>/state reading "ACTIVE" with a rate like "200 Gb/sec (4X HDR)".
std::vector<NicInfo> ReadInfinibandNics(const std::string& sysfs_root);

// The CPU of this host, for the mpi-cpu backend's nominal peak.
struct CpuInfo {
  std::string model;
  int logical_cpus = 0;
  double max_GHz = 0;            // cpufreq max, else the model name's "@ x.xGHz", else cpu MHz
  int fp32_flops_per_cycle = 0;  // per core: 64 with AVX-512, 32 with AVX2+FMA, else 8
};
CpuInfo ReadCpuInfo(const std::string& proc_cpuinfo, const std::string& cpufreq_max_khz_file);

struct Discovery {
  std::string backend;             // backend name
  std::vector<std::string> hosts;  // by world rank
  int nodes = 0;
  int ranks_per_node = 0;                     // the most ranks on any host
  backend::DeviceInfo device;                 // rank 0's
  std::optional<backend::NvmlTopology> nvml;  // rank 0's host
  std::string nvml_note;                      // why NVML is missing, when it is
  std::vector<NicInfo> nics;                  // rank 0's host
  CpuInfo cpu;                                // rank 0's host
};

// Collective over all ranks. Fails (kInvalidArgument: the launch is wrong)
// when ranks report different devices: profiles describe homogeneous clusters.
Result<Discovery> Discover(backend::Backend& b);

// The cluster description implied by `d` (see the header comment). GPUs that
// match a preset (by the name CUDA reports) take the preset's figures; others
// get documented estimates that a profile's measurements then override.
Result<topology::ClusterSpec> ClusterFromDiscovery(const Discovery& d);

// The peaks a profile's GEMM curves are relative to: the cluster GPU's.
PeakTable PeaksOf(const topology::ClusterSpec& c);

// The GPU preset whose device name matches `device_name` (exact, then family:
// "GH200", "H200", "H100", "A100" and "V100" by memory), or kNotFound.
Result<std::string> MatchGpuPreset(const std::string& device_name, int64_t memory_bytes);

}  // namespace paratune::profiler
