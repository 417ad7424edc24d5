#include "profiler/discovery.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/strings.h"
#include "topology/gpu.h"

namespace paratune::profiler {
namespace {

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return Trim(line);
}

std::string Slug(const std::string& name) {
  std::string s;
  for (char c : AsciiLower(name)) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      s += c;
    else if (!s.empty() && s.back() != '-')
      s += '-';
  }
  while (!s.empty() && s.back() == '-') s.pop_back();
  return s.empty() ? "device" : s;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kNvlinkGBps = 25.0;  // per link per direction, NVLink 2–4 (ecosystem.md §1.4)

}  // namespace

std::vector<NicInfo> ReadInfinibandNics(const std::string& sysfs_root) {
  namespace fs = std::filesystem;
  std::vector<NicInfo> nics;
  std::error_code ec;
  if (!fs::is_directory(sysfs_root, ec)) return nics;
  std::vector<fs::path> devices;
  for (const auto& dev : fs::directory_iterator(sysfs_root, ec)) devices.push_back(dev.path());
  std::sort(devices.begin(), devices.end());
  for (const fs::path& dev : devices) {
    std::vector<fs::path> ports;
    for (const auto& port : fs::directory_iterator(dev / "ports", ec)) ports.push_back(port.path());
    std::sort(ports.begin(), ports.end());
    for (const fs::path& port : ports) {
      // state reads "4: ACTIVE"; rate reads "200 Gb/sec (4X HDR)".
      if (ReadFirstLine((port / "state").string()).find("ACTIVE") == std::string::npos) continue;
      std::istringstream rate(ReadFirstLine((port / "rate").string()));
      double gbps = 0;
      if (!(rate >> gbps) || !(gbps > 0)) continue;
      nics.push_back({dev.filename().string() + ":" + port.filename().string(), gbps});
    }
  }
  return nics;
}

CpuInfo ReadCpuInfo(const std::string& proc_cpuinfo, const std::string& cpufreq_max_khz_file) {
  CpuInfo cpu;
  std::ifstream in(proc_cpuinfo);
  std::string line;
  double mhz = 0;
  bool avx512 = false, avx2 = false, fma = false;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = Trim(line.substr(0, colon));
    const std::string value = Trim(line.substr(colon + 1));
    if (key == "processor") ++cpu.logical_cpus;
    if (key == "model name" && cpu.model.empty()) cpu.model = value;
    if (key == "cpu MHz" && mhz == 0) mhz = std::atof(value.c_str());
    if (key == "flags" && !avx2) {
      std::istringstream ss(value);
      std::string f;
      while (ss >> f) {
        avx512 = avx512 || f == "avx512f";
        avx2 = avx2 || f == "avx2";
        fma = fma || f == "fma";
      }
    }
  }
  const std::string khz = ReadFirstLine(cpufreq_max_khz_file);
  if (!khz.empty() && std::atof(khz.c_str()) > 0) {
    cpu.max_GHz = std::atof(khz.c_str()) / 1e6;
  } else if (size_t at = cpu.model.find('@'); at != std::string::npos) {
    cpu.max_GHz = std::atof(cpu.model.c_str() + at + 1);
  }
  if (!(cpu.max_GHz > 0) && mhz > 0) cpu.max_GHz = std::round(mhz / 100.0) / 10.0;
  if (!(cpu.max_GHz > 0)) cpu.max_GHz = 1.0;
  cpu.fp32_flops_per_cycle = avx512 ? 64 : (avx2 && fma) ? 32 : 8;
  if (cpu.logical_cpus == 0) cpu.logical_cpus = 1;
  return cpu;
}

Result<std::string> MatchGpuPreset(const std::string& device_name, int64_t memory_bytes) {
  const std::string want = AsciiLower(device_name);
  for (const std::string& name : topology::GpuPresetNames()) {
    auto g = topology::GpuPreset(name);
    if (g.ok() && AsciiLower(g->display_name) == want) return name;
  }
  auto has = [&](const char* s) { return want.find(s) != std::string::npos; };
  if (has("gh200")) return std::string("gh200");
  if (has("h200")) return std::string("h200");
  if (has("h100")) return std::string("h100-sxm");
  if (has("a100")) return std::string(memory_bytes > int64_t{48} << 30 ? "a100-80gb" : "a100-40gb");
  if (has("v100")) return std::string(memory_bytes > int64_t{24} << 30 ? "v100-32gb" : "v100-16gb");
  return Status::NotFound("no GPU preset matches '" + device_name + "'");
}

Result<Discovery> Discover(backend::Backend& b) {
  Discovery d;
  d.backend = b.name();
  d.hosts = b.hosts();
  std::map<std::string, int> per_host;
  for (const std::string& h : d.hosts) ++per_host[h];
  d.nodes = static_cast<int>(per_host.size());
  for (const auto& [h, n] : per_host) d.ranks_per_node = std::max(d.ranks_per_node, n);
  PT_ASSIGN_OR_RETURN(d.device, b.DescribeDevice());
  PT_ASSIGN_OR_RETURN(
      std::vector<std::string> names,
      b.HostAllGather(d.device.name + " (" + std::to_string(d.device.memory_bytes) + " bytes)"));
  std::set<std::string> distinct(names.begin(), names.end());
  if (distinct.size() > 1) {
    std::string list;
    for (const std::string& n : distinct) list += (list.empty() ? "" : "; ") + n;
    return Status::InvalidArgument("ranks run different devices (" + list +
                                      "): a profile describes one kind of GPU");
  }
  if (d.device.kind == "cuda") {
    auto topo = backend::QueryNvmlTopology();
    if (topo.ok())
      d.nvml = *topo;
    else
      d.nvml_note = topo.status().message();
  } else {
    d.nvml_note = "not a GPU backend";
  }
  d.nics = ReadInfinibandNics("/sys/class/infiniband");
  d.cpu = ReadCpuInfo("/proc/cpuinfo", "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  return d;
}

Result<topology::ClusterSpec> ClusterFromDiscovery(const Discovery& d) {
  topology::ClusterSpec c;
  const backend::DeviceInfo& dev = d.device;
  const double memory_GiB = static_cast<double>(dev.memory_bytes) / kGiB;
  if (!(memory_GiB > 0)) return Status::InvalidArgument("the device reports no memory");
  topology::GpuSpec& g = c.gpu;
  std::string gpu_note;
  bool known_peaks = false;
  for (double p : dev.peak_tflops) known_peaks = known_peaks || p > 0;
  auto preset = dev.kind == "cuda" ? MatchGpuPreset(dev.name, dev.memory_bytes)
                                   : Result<std::string>(Status::NotFound("not a GPU"));
  if (preset.ok()) {
    PT_ASSIGN_OR_RETURN(g, topology::GpuPreset(*preset));
    gpu_note = "gpu preset " + *preset + " (matched '" + dev.name + "')";
    g.display_name = dev.name;
    g.memory_GiB = memory_GiB;
    g.sources["memory_GiB"] = "cudaGetDeviceProperties totalGlobalMem";
  } else {
    g.name = Slug(dev.name);
    g.display_name = dev.name;
    g.memory_GiB = memory_GiB;
    if (known_peaks) {
      for (int i = 0; i < topology::kNumPrecisions; ++i)
        g.peak_tflops[static_cast<size_t>(i)] = dev.peak_tflops[i];
      g.sources["peak_tflops"] = "the backend's configured rates";
    } else if (dev.kind == "cpu") {
      // Nominal fp32 peak of this rank's cores: cores × GHz × flops per cycle.
      const double cores = std::max(1, dev.multiprocessors);
      g.peak_tflops[static_cast<size_t>(topology::Precision::kFp32)] =
          cores * d.cpu.max_GHz * d.cpu.fp32_flops_per_cycle / 1e3;
      g.sources["peak_tflops"] = "estimate: " + std::to_string(static_cast<int>(cores)) +
                                 " logical CPU(s) × " + FormatFixed(d.cpu.max_GHz, 1) + " GHz × " +
                                 std::to_string(d.cpu.fp32_flops_per_cycle) +
                                 " fp32 flop/cycle (/proc/cpuinfo)";
      g.runtime_reserved_GiB = std::min(0.1, memory_GiB / 2);
    } else {
      // Unknown GPU: 128 fp32 lanes per SM × 2 flop (FMA) × clock, an estimate.
      g.peak_tflops[static_cast<size_t>(topology::Precision::kFp32)] =
          std::max(1, dev.multiprocessors) * 128 * 2 * std::max(0.5, dev.clock_GHz) / 1e3;
      g.sources["peak_tflops"] = "estimate: SMs × 128 fp32 lanes × 2 × clock (unknown GPU)";
    }
    g.hbm_GBps =
        dev.memory_peak_GBps > 0 ? dev.memory_peak_GBps : 10.0 * std::max(1, dev.multiprocessors);
    g.sources["hbm_GBps"] =
        dev.memory_peak_GBps > 0
            ? "device memory clock × bus width"
            : "estimate: 10 GB/s per core; the profile's copy bandwidth corrects it";
    // No curve before measuring: the ideal model until a profile replaces it.
    const int first = [&] {
      for (int i = 0; i < topology::kNumPrecisions; ++i) {
        if (g.peak_tflops[static_cast<size_t>(i)] > 0) return i;
      }
      return 0;
    }();
    g.gemm_efficiency[static_cast<size_t>(first)] = {{1.0, 1.0}};
    g.sources["gemm_efficiency"] = "none measured yet: ideal (1.0) until a profile replaces it";
    gpu_note = dev.kind + " device '" + dev.name + "' (no preset)";
  }
  g.source = "discovered by paratune profile: " + gpu_note;

  c.name = "discovered-" + (d.hosts.empty() ? std::string("host") : d.hosts.front());
  c.gpus_per_node = std::max(1, d.ranks_per_node);
  c.max_nodes = std::max(1, d.nodes);
  std::string fabric_note;
  if (d.nvml && !d.nvml->gpus.empty()) {
    c.intra_node_fabric = backend::ClassifyFabric(*d.nvml);
    if (c.intra_node_fabric == "nvswitch") {
      int links = d.nvml->gpus.front().nvlinks_to_switch;
      for (const auto& gpu : d.nvml->gpus) links = std::min(links, gpu.nvlinks_to_switch);
      c.intra_node_GBps = links * kNvlinkGBps * c.link_efficiency;
      fabric_note = "NVSwitch, " + std::to_string(links) + " NVLinks per GPU (NVML)";
    } else if (c.intra_node_fabric == "mesh") {
      const int n = c.gpus_per_node;
      c.link_GBps.assign(static_cast<size_t>(n), std::vector<double>(static_cast<size_t>(n), 0.0));
      const auto& m = d.nvml->matrix;
      for (int i = 0; i < n && i < static_cast<int>(m.size()); ++i) {
        for (int j = 0; j < n && j < static_cast<int>(m[static_cast<size_t>(i)].size()); ++j) {
          const std::string& cell = m[static_cast<size_t>(i)][static_cast<size_t>(j)];
          if (i != j && cell.rfind("NV", 0) == 0) {
            c.link_GBps[static_cast<size_t>(i)][static_cast<size_t>(j)] =
                std::atoi(cell.c_str() + 2) * kNvlinkGBps;
          }
        }
      }
      fabric_note = "NVLink mesh (NVML)";
    } else {
      fabric_note = "PCIe (NVML: no NVLink)";
    }
  } else {
    c.intra_node_fabric = "pcie";
    fabric_note = dev.kind == "cuda" ? "PCIe assumed (" + d.nvml_note + ")" : "host memory";
  }
  if (!d.nics.empty()) {
    double slowest = d.nics.front().rate_Gbps;
    for (const NicInfo& n : d.nics) slowest = std::min(slowest, n.rate_Gbps);
    c.nics_per_node = static_cast<int>(d.nics.size());
    c.nic_GBps = slowest / 8.0;
  }
  c.source = "discovered by paratune profile --backend " + d.backend + " on " +
             std::to_string(c.max_nodes) + " node(s) × " + std::to_string(c.gpus_per_node) +
             " rank(s): " + fabric_note + "; " + std::to_string(c.nics_per_node) +
             " active InfiniBand port(s)";
  // Round-trip through the strict parser: the planner must accept what we write.
  auto parsed = topology::ParseClusterSpec(topology::ClusterSpecToJson(c), "/cluster");
  if (!parsed.ok()) return parsed.status().WithContext("discovered cluster description");
  return *parsed;
}

PeakTable PeaksOf(const topology::ClusterSpec& c) {
  PeakTable t;
  for (int i = 0; i < topology::kNumPrecisions; ++i) {
    t.tflops[static_cast<size_t>(i)] = c.gpu.peak_tflops[static_cast<size_t>(i)];
  }
  t.source = "peak of " + c.gpu.name +
             (c.gpu.sources.count("peak_tflops") ? " (" + c.gpu.sources.at("peak_tflops") + ")"
                                                 : std::string(" (gpu preset)"));
  return t;
}

}  // namespace paratune::profiler
