// `paratune presets`: list or show the built-in models, GPUs and clusters.
#include <iomanip>
#include <ostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "common/strings.h"
#include "planner/framework.h"
#include "planner/model.h"
#include "planner/network.h"
#include "topology/cluster.h"

namespace paratune::cli {
namespace {

constexpr const char* kPresetsHelp =
    R"(usage: paratune presets [models|networks|gpus|clusters|frameworks] [--format table|json]
       paratune presets show NAME

Lists the built-in presets (every number has a source: docs/presets.md,
docs/networks.md and docs/frameworks.md), or prints one model, network,
cluster or GPU preset as JSON, ready to copy into a request and edit (a
network as its explicit layer list, the form `--network FILE` reads). Frameworks are chosen by name
(training.framework / --framework).
)";

}  // namespace

int RunPresets(const Args& args, Io io) {
  Flags flags({"--format"}, {"--help"}, {{"-h", "--help"}});
  if (auto done = ParseOrHelp(flags, args, io, "presets", kPresetsHelp)) return *done;
  const auto& pos = flags.positionals();
  const std::string format = flags.GetOr("--format", "table");
  if (!pos.empty() && pos[0] == "show") {
    if (pos.size() != 2) return UsageError(io, "presets", Status::InvalidArgument("show needs a NAME"));
    const std::string& name = pos[1];
    if (auto m = planner::ModelPreset(name); m.ok()) {
      io.out << planner::ModelSpecToJson(*m).dump(2) << "\n";
    } else if (auto n = planner::NetworkPreset(name); n.ok()) {
      io.out << planner::NetworkToJson(*n).dump(2) << "\n";
    } else if (auto c = topology::ClusterPreset(name); c.ok()) {
      io.out << topology::ClusterSpecToJson(*c).dump(2) << "\n";
    } else if (auto g = topology::GpuPreset(name); g.ok()) {
      io.out << topology::GpuSpecToJson(*g).dump(2) << "\n";
    } else {
      return UsageError(io, "presets", Status::NotFound("no model, network, cluster or GPU preset named '" +
                                                        name + "' (see paratune presets)"));
    }
    return kExitOk;
  }
  const std::string kind = pos.empty() ? "all" : pos[0];
  if (kind != "all" && kind != "models" && kind != "networks" && kind != "gpus" && kind != "clusters" &&
      kind != "frameworks") {
    return UsageError(io, "presets", Status::InvalidArgument(
                                         "unknown kind '" + kind +
                                         "' (models | networks | gpus | clusters | frameworks | show NAME)"));
  }
  OrderedJson doc;
  doc["schema"] = "paratune.presets/v1";
  if (kind == "all" || kind == "models") {
    OrderedJson arr = OrderedJson::array();
    if (format == "table") io.out << "models\n";
    for (const auto& name : planner::ModelPresetNames()) {
      auto m = planner::ModelPreset(name);
      if (!m.ok()) return UsageError(io, "presets", m.status());
      const double psi = static_cast<double>(m->ParamCount()) / 1e9;
      arr.push_back({{"name", name}, {"params_B", psi}, {"layers", m->layers}, {"hidden", m->hidden}});
      if (format == "table") {
        io.out << "  " << std::left << std::setw(18) << name << std::right << std::setw(9)
               << FormatFixed(psi, 2) << "B  L=" << m->layers << " h=" << m->hidden << " a=" << m->heads
               << " kv=" << m->kv_heads << " f=" << m->ffn_hidden << " V=" << m->vocab << "\n";
      }
    }
    doc["models"] = arr;
  }
  if (kind == "all" || kind == "networks") {
    OrderedJson arr = OrderedJson::array();
    if (format == "table") io.out << "networks\n";
    for (const auto& name : planner::NetworkPresetNames()) {
      auto n = planner::NetworkPreset(name);
      if (!n.ok()) return UsageError(io, "presets", n.status());
      const double params_M = n->Params() / 1e6, gflop = n->TrainingFlops() / 1e9;
      arr.push_back({{"name", name}, {"family", n->family}, {"params_M", params_M},
                     {"train_GFLOP_per_sample", gflop}, {"sample", n->sample}});
      if (format == "table") {
        io.out << "  " << std::left << std::setw(22) << name << std::setw(10) << n->family << std::right
               << std::setw(10) << FormatFixed(params_M, 1) << "M " << std::setw(10) << FormatFixed(gflop, 1)
               << " GFLOP/sample trained  " << n->sample << "\n";
      }
    }
    doc["networks"] = arr;
  }
  if (kind == "all" || kind == "gpus") {
    OrderedJson arr = OrderedJson::array();
    if (format == "table") io.out << "gpus\n";
    for (const auto& name : topology::GpuPresetNames()) {
      auto g = topology::GpuPreset(name);
      if (!g.ok()) return UsageError(io, "presets", g.status());
      const double bf16 = g->PeakTflops(topology::Precision::kBf16);
      arr.push_back({{"name", name}, {"memory_GiB", g->memory_GiB}, {"bf16_tflops", bf16}});
      if (format == "table") {
        io.out << "  " << std::left << std::setw(18) << name << std::right << std::setw(7)
               << FormatFixed(g->memory_GiB, 0) << " GiB " << std::setw(7) << FormatFixed(bf16, 0)
               << " bf16 TFLOP/s " << std::setw(6) << FormatFixed(g->hbm_GBps, 0) << " GB/s HBM\n";
      }
    }
    doc["gpus"] = arr;
  }
  if (kind == "all" || kind == "clusters") {
    OrderedJson arr = OrderedJson::array();
    if (format == "table") io.out << "clusters\n";
    for (const auto& name : topology::ClusterPresetNames()) {
      auto c = topology::ClusterPreset(name);
      if (!c.ok()) return UsageError(io, "presets", c.status());
      arr.push_back({{"name", name}, {"gpu", c->gpu.name}, {"gpus_per_node", c->gpus_per_node}});
      if (format == "table") {
        io.out << "  " << std::left << std::setw(18) << name << std::right << c->gpus_per_node
               << " × " << std::left << std::setw(12) << c->gpu.name << std::right
               << " intra " << c->intra_node_fabric << ", " << c->nics_per_node << " NICs × "
               << FormatFixed(c->nic_GBps, 0) << " GB/s\n";
      }
    }
    doc["clusters"] = arr;
  }
  if (kind == "all" || kind == "frameworks") {
    OrderedJson arr = OrderedJson::array();
    if (format == "table") io.out << "frameworks\n";
    for (planner::Framework f : planner::AllFrameworks()) {
      const planner::FrameworkSpec& spec = planner::FrameworkPreset(f);
      arr.push_back({{"name", spec.name}, {"display_name", spec.display_name},
                     {"compile", spec.support.compile}});
      if (format == "table") {
        io.out << "  " << std::left << std::setw(20) << spec.name << spec.display_name << "\n";
      }
    }
    doc["frameworks"] = arr;
  }
  if (format == "json") io.out << doc.dump(2) << "\n";
  return kExitOk;
}

}  // namespace paratune::cli
