// backend/nvml_topology.h: the GPUs of this host and how they are
// wired, read from NVML the way `nvidia-smi topo -m` reads it (ecosystem.md
// §1.3–1.4). libnvidia-ml is opened with dlopen at run time, so paratune needs
// neither nvml.h nor the driver to build, and a host without the driver gets
// kUnavailable with the reason instead of a crash. Symbols missing on old
// drivers (nvmlDeviceGetNvLinkRemoteDeviceType on 450.x) degrade to "unknown".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace paratune::backend {

struct NvmlGpu {
  std::string name;           // "NVIDIA H100 80GB HBM3"
  std::string uuid;           // "GPU-…"
  std::string pci_bus_id;     // "00000000:07:00.0"
  int nvlinks_active = 0;     // active NVLink links
  int nvlinks_to_switch = 0;  // of which reach an NVSwitch
  int64_t memory_bytes = 0;
  // SM clocks, MHz (nvmlDeviceGetClockInfo / nvmlDeviceGetMaxClockInfo with
  // NVML_CLOCK_SM): at the time of the query and the most the GPU may run at.
  // 0 = unknown (the driver lacks the call or refuses it).
  int sm_clock_MHz = 0;
  int sm_clock_max_MHz = 0;
};

struct NvmlTopology {
  std::string driver_version;
  std::vector<NvmlGpu> gpus;  // by NVML index
  // `nvidia-smi topo -m` vocabulary per ordered pair: "X" on the diagonal,
  // "NV<links>" when NVLink joins them (directly or through NVSwitch), else
  // "PIX" | "PXB" | "PHB" | "NODE" | "SYS" from the PCIe common ancestor.
  std::vector<std::vector<std::string>> matrix;
};

// Reads the topology. kUnavailable when libnvidia-ml.so.1 cannot be loaded or
// nvmlInit fails (no driver), with the loader's reason.
Result<NvmlTopology> QueryNvmlTopology();

// The entry of `topo` for the GPU at `pci_bus_id` (either spelling,
// "0000:07:00.0" or NVML's "00000000:07:00.0"); nullptr when none is.
const NvmlGpu* FindNvmlGpu(const NvmlTopology& topo, const std::string& pci_bus_id);

// NVML nvmlGpuTopologyLevel_t → nvidia-smi legend: 0 "X"... 10 "PIX", 20 "PXB",
// 30 "PHB", 40 "NODE", 50 "SYS"; other values "?".
const char* TopologyLevelName(int nvml_level);

// The intra-node fabric the matrix implies, in ClusterSpec's vocabulary:
// "nvswitch" when every GPU reaches an NVSwitch, "mesh" when NVLink joins GPUs
// directly, "pcie" otherwise (and for an empty topology).
std::string ClassifyFabric(const NvmlTopology& topo);

}  // namespace paratune::backend
