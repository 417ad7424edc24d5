#include "backend/nvml_topology.h"

#include <dlfcn.h>

#include <cctype>
#include <cstring>
#include <map>

namespace paratune::backend {
namespace {

// The slice of nvml.h we use, declared here so no NVML header is needed. Layouts
// follow the public nvml.h (nvmlPciInfo_t is the v3 layout).
using NvmlReturn = int;
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr int kNvmlMaxLinks = 18;         // NVML_NVLINK_MAX_LINKS
constexpr int kNvmlDeviceTypeSwitch = 2;  // NVML_NVLINK_DEVICE_TYPE_SWITCH
constexpr int kNvmlClockSm = 1;           // NVML_CLOCK_SM of nvmlClockType_t
struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct NvmlMemory {
  unsigned long long total, free, used;
};

struct Nvml {
  void* lib = nullptr;
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*driver_version)(char*, unsigned) = nullptr;
  NvmlReturn (*count)(unsigned*) = nullptr;
  NvmlReturn (*handle)(unsigned, NvmlDevice*) = nullptr;
  NvmlReturn (*name)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*uuid)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*pci)(NvmlDevice, NvmlPciInfo*) = nullptr;
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*link_state)(NvmlDevice, unsigned, int*) = nullptr;
  NvmlReturn (*link_remote_pci)(NvmlDevice, unsigned, NvmlPciInfo*) = nullptr;
  NvmlReturn (*link_remote_type)(NvmlDevice, unsigned, int*) = nullptr;  // may be absent
  NvmlReturn (*common_ancestor)(NvmlDevice, NvmlDevice, int*) = nullptr;
  NvmlReturn (*clock)(NvmlDevice, int, unsigned*) = nullptr;      // may be absent
  NvmlReturn (*max_clock)(NvmlDevice, int, unsigned*) = nullptr;  // may be absent

  ~Nvml() {
    if (shutdown) shutdown();
    if (lib) dlclose(lib);
  }
  std::string Error(NvmlReturn r) const {
    return error_string ? error_string(r) : "NVML error " + std::to_string(r);
  }
};

template <typename F>
bool Load(void* lib, const char* symbol, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, symbol));
  return *out != nullptr;
}

// "00000000:07:00.0" and "0000:07:00.0" name the same device: compare the tail.
std::string NormalizeBusId(const char* id) {
  std::string s(id);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const size_t colon = s.find(':');
  if (colon != std::string::npos && s.find(':', colon + 1) != std::string::npos) {
    s = s.substr(colon + 1);  // drop the domain
  }
  return s;
}

}  // namespace

const char* TopologyLevelName(int nvml_level) {
  switch (nvml_level) {
    case 0:
      return "X";
    case 10:
      return "PIX";
    case 20:
      return "PXB";
    case 30:
      return "PHB";
    case 40:
      return "NODE";
    case 50:
      return "SYS";
    default:
      return "?";
  }
}

std::string ClassifyFabric(const NvmlTopology& topo) {
  if (topo.gpus.empty()) return "pcie";
  bool all_switch = true;
  for (const NvmlGpu& g : topo.gpus) all_switch = all_switch && g.nvlinks_to_switch > 0;
  if (all_switch) return "nvswitch";
  for (size_t i = 0; i < topo.matrix.size(); ++i) {
    for (size_t j = 0; j < topo.matrix[i].size(); ++j) {
      if (i != j && topo.matrix[i][j].rfind("NV", 0) == 0) return "mesh";
    }
  }
  return "pcie";
}

Result<NvmlTopology> QueryNvmlTopology() {
  Nvml nvml;
  nvml.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!nvml.lib) {
    const char* why = dlerror();
    return Status::Unavailable(std::string("NVML not available: ") +
                               (why ? why : "cannot load libnvidia-ml.so.1"));
  }
  bool ok = Load(nvml.lib, "nvmlInit_v2", &nvml.init) &&
            Load(nvml.lib, "nvmlErrorString", &nvml.error_string) &&
            Load(nvml.lib, "nvmlSystemGetDriverVersion", &nvml.driver_version) &&
            Load(nvml.lib, "nvmlDeviceGetCount_v2", &nvml.count) &&
            Load(nvml.lib, "nvmlDeviceGetHandleByIndex_v2", &nvml.handle) &&
            Load(nvml.lib, "nvmlDeviceGetName", &nvml.name) &&
            Load(nvml.lib, "nvmlDeviceGetUUID", &nvml.uuid) &&
            Load(nvml.lib, "nvmlDeviceGetPciInfo_v3", &nvml.pci) &&
            Load(nvml.lib, "nvmlDeviceGetMemoryInfo", &nvml.memory) &&
            Load(nvml.lib, "nvmlDeviceGetNvLinkState", &nvml.link_state) &&
            Load(nvml.lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", &nvml.link_remote_pci) &&
            Load(nvml.lib, "nvmlDeviceGetTopologyCommonAncestor", &nvml.common_ancestor);
  if (!ok) return Status::Unavailable("NVML too old: a required symbol is missing");
  Load(nvml.lib, "nvmlDeviceGetNvLinkRemoteDeviceType", &nvml.link_remote_type);
  Load(nvml.lib, "nvmlDeviceGetClockInfo", &nvml.clock);
  Load(nvml.lib, "nvmlDeviceGetMaxClockInfo", &nvml.max_clock);
  NvmlReturn r = nvml.init();
  if (r != kNvmlSuccess) return Status::Unavailable("nvmlInit failed: " + nvml.Error(r));
  Load(nvml.lib, "nvmlShutdown", &nvml.shutdown);

  NvmlTopology topo;
  char buf[128] = {0};
  if (nvml.driver_version(buf, sizeof buf) == kNvmlSuccess) topo.driver_version = buf;
  unsigned n = 0;
  if ((r = nvml.count(&n)) != kNvmlSuccess) {
    return Status::Unavailable("nvmlDeviceGetCount failed: " + nvml.Error(r));
  }
  std::vector<NvmlDevice> devs(n);
  std::map<std::string, int> index_of_bus;
  for (unsigned i = 0; i < n; ++i) {
    if ((r = nvml.handle(i, &devs[i])) != kNvmlSuccess) {
      return Status::Unavailable("nvmlDeviceGetHandleByIndex(" + std::to_string(i) +
                                 ") failed: " + nvml.Error(r));
    }
    NvmlGpu g;
    if (nvml.name(devs[i], buf, sizeof buf) == kNvmlSuccess) g.name = buf;
    if (nvml.uuid(devs[i], buf, sizeof buf) == kNvmlSuccess) g.uuid = buf;
    NvmlPciInfo pci{};
    if (nvml.pci(devs[i], &pci) == kNvmlSuccess) {
      g.pci_bus_id = pci.bus_id;
      index_of_bus[NormalizeBusId(pci.bus_id)] = static_cast<int>(i);
    }
    NvmlMemory mem{};
    if (nvml.memory(devs[i], &mem) == kNvmlSuccess)
      g.memory_bytes = static_cast<int64_t>(mem.total);
    unsigned mhz = 0;
    if (nvml.clock && nvml.clock(devs[i], kNvmlClockSm, &mhz) == kNvmlSuccess)
      g.sm_clock_MHz = static_cast<int>(mhz);
    if (nvml.max_clock && nvml.max_clock(devs[i], kNvmlClockSm, &mhz) == kNvmlSuccess)
      g.sm_clock_max_MHz = static_cast<int>(mhz);
    topo.gpus.push_back(g);
  }
  // NVLink: count links per remote GPU (the NV# of nvidia-smi) and links to a switch.
  std::vector<std::vector<int>> links(n, std::vector<int>(n, 0));
  for (unsigned i = 0; i < n; ++i) {
    for (unsigned l = 0; l < static_cast<unsigned>(kNvmlMaxLinks); ++l) {
      int active = 0;
      if (nvml.link_state(devs[i], l, &active) != kNvmlSuccess || !active) continue;
      ++topo.gpus[i].nvlinks_active;
      int type = -1;
      if (nvml.link_remote_type && nvml.link_remote_type(devs[i], l, &type) == kNvmlSuccess &&
          type == kNvmlDeviceTypeSwitch) {
        ++topo.gpus[i].nvlinks_to_switch;
        continue;
      }
      NvmlPciInfo remote{};
      if (nvml.link_remote_pci(devs[i], l, &remote) != kNvmlSuccess) continue;
      auto it = index_of_bus.find(NormalizeBusId(remote.bus_id));
      if (it != index_of_bus.end()) ++links[i][static_cast<size_t>(it->second)];
    }
  }
  topo.matrix.assign(n, std::vector<std::string>(n));
  for (unsigned i = 0; i < n; ++i) {
    for (unsigned j = 0; j < n; ++j) {
      if (i == j) {
        topo.matrix[i][j] = "X";
      } else if (links[i][j] > 0) {
        topo.matrix[i][j] = "NV" + std::to_string(links[i][j]);
      } else if (topo.gpus[i].nvlinks_to_switch > 0 && topo.gpus[j].nvlinks_to_switch > 0) {
        topo.matrix[i][j] = "NV" + std::to_string(topo.gpus[i].nvlinks_to_switch);
      } else {
        int level = -1;
        topo.matrix[i][j] = nvml.common_ancestor(devs[i], devs[j], &level) == kNvmlSuccess
                                ? TopologyLevelName(level)
                                : "?";
      }
    }
  }
  return topo;
}

const NvmlGpu* FindNvmlGpu(const NvmlTopology& topo, const std::string& pci_bus_id) {
  const std::string want = NormalizeBusId(pci_bus_id.c_str());
  for (const NvmlGpu& g : topo.gpus) {
    if (!g.pci_bus_id.empty() && NormalizeBusId(g.pci_bus_id.c_str()) == want) return &g;
  }
  return nullptr;
}

}  // namespace paratune::backend
