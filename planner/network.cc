#include "planner/network.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/embedded.h"
#include "common/user_input.h"
#include "planner/network_families.h"
#include "topology/preset_util.h"

namespace paratune {
const std::vector<EmbeddedPreset>& EmbeddedPresets_networks();
}  // namespace paratune

namespace paratune::planner {

using Ext = std::array<int64_t, 3>;

const char* LayerOpName(LayerOp op) {
  switch (op) {
    case LayerOp::kConv: return "conv";
    case LayerOp::kLinear: return "linear";
    case LayerOp::kAttention: return "attention";
    case LayerOp::kNorm: return "norm";
    case LayerOp::kElementwise: return "elementwise";
    case LayerOp::kResample: return "resample";
  }
  return "?";
}

const char* TensorSplitName(TensorSplit s) {
  switch (s) {
    case TensorSplit::kNone: return "none";
    case TensorSplit::kColumn: return "column";
    case TensorSplit::kRow: return "row";
    case TensorSplit::kSharded: return "sharded";
  }
  return "?";
}

NetLayer TensorShard(const NetLayer& l, int t) {
  NetLayer s = l;
  if (t <= 1) return s;
  switch (l.tensor) {
    case TensorSplit::kNone: break;
    case TensorSplit::kColumn: s.out_channels /= t; break;
    case TensorSplit::kRow: s.in_channels /= t; break;
    case TensorSplit::kSharded:
      if (l.op == LayerOp::kAttention) {
        s.heads /= t;
        s.in_channels = s.out_channels = s.heads * s.head_dim;
      } else {
        s.in_channels /= t;
        s.out_channels /= t;
      }
      break;
  }
  return s;
}

bool IsSelfAttention(const NetLayer& l) { return l.op == LayerOp::kAttention && l.kv_tokens == l.tokens; }

NetLayer SequenceShard(const NetLayer& l, int s) {
  NetLayer x = l;
  if (s <= 1) return x;
  auto split = [s](int64_t n) { return (n + s - 1) / s; };
  switch (l.op) {
    case LayerOp::kLinear:
      if (l.tokens > 1) x.tokens = split(l.tokens);
      break;
    case LayerOp::kAttention:
      if (IsSelfAttention(l)) {
        x.heads /= s;
        x.in_channels = x.out_channels = x.heads * x.head_dim;
      } else {
        x.tokens = split(l.tokens);
      }
      break;
    case LayerOp::kConv: break;
    default:
      if (l.dims == 1) x.extent[0] = split(l.extent[0]);
      break;
  }
  return x;
}

Status CheckSequenceSplit(const Network& net, int s, int t) {
  if (s <= 1) return Status::Ok();
  bool self = false;
  for (const NetLayer& l : net.layers) {
    if (l.op == LayerOp::kConv && l.input_grad) {
      return Status::InvalidArgument("sequence parallelism splits the tokens of a transformer; '" + l.name +
                                     "' is a convolution inside the network (split it spatially instead)");
    }
    if (!IsSelfAttention(l)) continue;
    self = true;
    const int64_t heads = TensorShard(l, t).heads;
    if (heads % s != 0) {
      return Status::InvalidArgument("sequence parallelism " + std::to_string(s) + " does not divide layer '" +
                                     l.name + "' (" + std::to_string(heads) + " heads per tensor rank)");
    }
  }
  if (!self) {
    return Status::InvalidArgument("network '" + net.name + "' has no self-attention; sequence must be 1");
  }
  return Status::Ok();
}

Status CheckTensorSplit(const Network& net, int t) {
  if (t <= 1) return Status::Ok();
  bool column = false;
  for (const NetLayer& l : net.layers) {
    column = column || l.tensor == TensorSplit::kColumn;
    const int64_t width = l.tensor == TensorSplit::kColumn ? l.out_channels
                          : l.tensor == TensorSplit::kRow  ? l.in_channels
                          : l.tensor == TensorSplit::kSharded ? (l.op == LayerOp::kAttention ? l.heads : l.in_channels)
                                                              : t;
    if (width % t != 0) {
      return Status::InvalidArgument("tensor parallelism " + std::to_string(t) + " does not divide layer '" +
                                     l.name + "' (" + TensorSplitName(l.tensor) + " width " +
                                     std::to_string(width) + ")");
    }
  }
  if (!column) {
    return Status::InvalidArgument("network '" + net.name +
                                   "' has no tensor-parallel layers (tensor: column/row); tensor must be 1");
  }
  return Status::Ok();
}

namespace {

double Volume(const Ext& e) {
  return static_cast<double>(e[0]) * static_cast<double>(e[1]) * static_cast<double>(e[2]);
}
double KernelVolume(const NetLayer& l) { return std::pow(static_cast<double>(l.kernel), l.dims); }

}  // namespace

std::array<int64_t, 3> NetLayer::OutExtent() const {
  Ext out = extent;
  for (int d = 0; d < dims; ++d) {
    if (transposed || upsample > 1) {
      out[d] = extent[d] * (transposed ? stride : upsample);
    } else {
      out[d] = (extent[d] + stride - 1) / stride;
    }
  }
  return out;
}

double NetLayer::InElems() const {
  switch (op) {
    case LayerOp::kLinear: return static_cast<double>(tokens) * in_channels;
    case LayerOp::kAttention: return static_cast<double>(tokens) * heads * head_dim;
    default: return static_cast<double>(in_channels) * Volume(extent);
  }
}

double NetLayer::OutElems() const {
  switch (op) {
    case LayerOp::kConv: return static_cast<double>(out_channels) * Volume(OutExtent());
    case LayerOp::kLinear: return static_cast<double>(tokens) * out_channels;
    case LayerOp::kAttention: return InElems();
    case LayerOp::kResample: return static_cast<double>(in_channels) * Volume(OutExtent());
    default: return InElems();
  }
}

std::vector<bool> RecomputedLayers(const Network& net) {
  std::vector<bool> out(net.layers.size(), false);
  bool any = false;
  for (size_t begin = 0; begin < net.layers.size();) {
    size_t end = begin;
    bool holds = false;
    while (end < net.layers.size() && net.layers[end].repeat > 1) holds |= net.layers[end++].checkpoint;
    for (size_t i = begin; holds && i < end; ++i) out[i] = true;
    any |= holds;
    begin = std::max(end, begin + 1);
  }
  return any ? out : std::vector<bool>{};
}

double NetLayer::Params() const {
  if (weights_shared) return 0;
  switch (op) {
    case LayerOp::kConv:
      return static_cast<double>(in_channels) / groups * out_channels * KernelVolume(*this) +
             (bias ? out_channels : 0);
    case LayerOp::kLinear:
      return static_cast<double>(in_channels) * out_channels + (bias ? out_channels : 0);
    case LayerOp::kNorm: return bias ? 2.0 * in_channels : 0;  // scale and shift
    default: return 0;
  }
}

double NetLayer::ForwardFlops() const {
  switch (op) {
    case LayerOp::kConv: {
      // Every output element of a convolution is a dot product over the input
      // channels of its group and the kernel window; a transposed convolution
      // scatters every input element the same way.
      const double positions = transposed ? Volume(extent) : Volume(OutExtent());
      const double macs_per = transposed ? static_cast<double>(out_channels) / groups * in_channels
                                         : static_cast<double>(in_channels) / groups * out_channels;
      return 2.0 * positions * macs_per * KernelVolume(*this);
    }
    case LayerOp::kLinear: return 2.0 * static_cast<double>(tokens) * in_channels * out_channels;
    case LayerOp::kAttention:
      // Scores (Q·Kᵀ) and their product with V, per head.
      return 4.0 * static_cast<double>(tokens) * kv_tokens * heads * head_dim;
    default: return 0;  // normalisations and element-wise work are not counted as model FLOPs
  }
}

double Network::Params() const {
  double p = 0;
  for (const NetLayer& l : layers) {
    if (!l.frozen) p += l.Params() * l.repeat;
  }
  return p;
}

double Network::ForwardFlops() const {
  double f = 0;
  for (const NetLayer& l : layers) f += l.ForwardFlops() * l.repeat;
  return f;
}

double Network::TrainingFlops() const {
  double f = 0;
  for (const NetLayer& l : layers) {
    const double fwd = l.ForwardFlops() * l.repeat;
    if (l.frozen) {
      f += fwd;
      continue;
    }
    // The weight gradient costs a forward; the input gradient another unless
    // nothing before the layer needs it. Attention has no weights; its
    // backward (dQ, dK, dV from the scores) counts twice its forward, as
    // Megatron's model FLOPs count it.
    const bool has_weights = l.op == LayerOp::kConv || l.op == LayerOp::kLinear;
    const double grads = l.op == LayerOp::kAttention ? 2.0 : 1.0;
    f += fwd + (has_weights ? fwd : 0) + (l.input_grad ? grads * fwd : 0);
  }
  return f;
}

namespace {

using network_detail::PositiveInt;
using network_detail::PositiveList;

// ---------------------------------------------------------------------------
// The explicit form: every layer spelled out.

Result<LayerOp> ParseOp(const std::string& s) {
  for (LayerOp op : {LayerOp::kConv, LayerOp::kLinear, LayerOp::kAttention, LayerOp::kNorm,
                     LayerOp::kElementwise, LayerOp::kResample}) {
    if (s == LayerOpName(op)) return op;
  }
  return Status::InvalidArgument("'" + s + "' is not a layer op (conv, linear, attention, norm, elementwise, resample)");
}

Result<TensorSplit> ParseTensorSplit(const std::string& s) {
  for (TensorSplit t : {TensorSplit::kNone, TensorSplit::kColumn, TensorSplit::kRow, TensorSplit::kSharded}) {
    if (s == TensorSplitName(t)) return t;
  }
  return Status::InvalidArgument("'" + s + "' is not a tensor split (none, column, row, sharded)");
}

Result<NetLayer> ParseLayer(const Json& j, const std::string& pointer) {
  ObjectReader r(j, pointer);
  NetLayer l;
  PT_RETURN_IF_ERROR(r.Parsed("op", ParseOp, &l.op));
  PT_RETURN_IF_ERROR(r.OptString("name", &l.name));
  int64_t kernel = 1, stride = 1, upsample = 1, groups = 1;
  PT_RETURN_IF_ERROR(PositiveInt(r, "kernel", &kernel, 1024));
  PT_RETURN_IF_ERROR(PositiveInt(r, "stride", &stride, 64));
  PT_RETURN_IF_ERROR(PositiveInt(r, "upsample", &upsample, 64));
  PT_RETURN_IF_ERROR(PositiveInt(r, "groups", &groups, 1 << 16));
  l.kernel = static_cast<int>(kernel);
  l.stride = static_cast<int>(stride);
  l.upsample = static_cast<int>(upsample);
  l.groups = static_cast<int>(groups);
  PT_RETURN_IF_ERROR(r.OptBool("transposed", &l.transposed));
  PT_RETURN_IF_ERROR(r.OptBool("bias", &l.bias));
  PT_RETURN_IF_ERROR(r.OptBool("input_grad", &l.input_grad));
  PT_RETURN_IF_ERROR(r.OptBool("frozen", &l.frozen));
  PT_RETURN_IF_ERROR(r.OptBool("weights_shared", &l.weights_shared));
  PT_RETURN_IF_ERROR(r.OptBool("checkpoint", &l.checkpoint));
  PT_RETURN_IF_ERROR(PositiveInt(r, "repeat", &l.repeat, 1 << 20));
  PT_RETURN_IF_ERROR(r.OptParsed("tensor", ParseTensorSplit, &l.tensor));
  PT_RETURN_IF_ERROR(r.OptNumber("tensors", &l.tensors));
  if (!(l.tensors >= 1 && l.tensors <= 64)) return r.Error("tensors", "must be in [1, 64]");
  if (l.op == LayerOp::kLinear || l.op == LayerOp::kAttention) {
    PT_RETURN_IF_ERROR(PositiveInt(r, "tokens", &l.tokens, int64_t{1} << 30));
    if (l.op == LayerOp::kLinear) {
      PT_RETURN_IF_ERROR(r.Integer("in_features", &l.in_channels));
      PT_RETURN_IF_ERROR(r.Integer("out_features", &l.out_channels));
      if (l.in_channels < 1 || l.out_channels < 1 || l.in_channels > (1 << 24) || l.out_channels > (1 << 24)) {
        return r.Error("in_features", "in_features and out_features must be in [1, 2^24]");
      }
    } else {
      l.kv_tokens = l.tokens;
      PT_RETURN_IF_ERROR(PositiveInt(r, "kv_tokens", &l.kv_tokens, int64_t{1} << 30));
      PT_RETURN_IF_ERROR(r.Integer("heads", &l.heads));
      PT_RETURN_IF_ERROR(r.Integer("head_dim", &l.head_dim));
      if (l.heads < 1 || l.head_dim < 1 || l.heads > 4096 || l.head_dim > 4096) {
        return r.Error("heads", "heads and head_dim must be in [1, 4096]");
      }
      l.in_channels = l.out_channels = l.heads * l.head_dim;
    }
    if (!l.tokens) return r.Error("tokens", "is required for " + std::string(LayerOpName(l.op)));
    return r.Finish().ok() ? Result<NetLayer>(l) : Result<NetLayer>(r.Finish());
  }
  std::vector<int64_t> in;
  PT_RETURN_IF_ERROR(PositiveList(r, "in", &in, true));
  if (in.size() < 2 || in.size() > 4) {
    return r.Error("in", "must be [channels, d1] to [channels, d1, d2, d3]");
  }
  l.in_channels = in[0];
  l.dims = static_cast<int>(in.size()) - 1;
  for (int d = 0; d < l.dims; ++d) l.extent[d] = in[d + 1];
  l.out_channels = l.in_channels;
  if (l.op == LayerOp::kConv) {
    PT_RETURN_IF_ERROR(r.Integer("out_channels", &l.out_channels));
    if (l.out_channels < 1 || l.out_channels > (1 << 24)) return r.Error("out_channels", "must be in [1, 2^24]");
    if (l.in_channels % l.groups || l.out_channels % l.groups) {
      return r.Error("groups", "must divide the input and output channels");
    }
  }
  PT_RETURN_IF_ERROR(r.Finish());
  return l;
}

Result<Network> ParseLayers(ObjectReader& r, const std::string& pointer, Network n) {
  const Json& layers = r.Raw("layers");
  if (!layers.is_array() || layers.empty() || layers.size() > 100000) {
    return r.Error("layers", "must be a list of 1 to 100000 layers");
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    auto l = ParseLayer(layers[i], pointer + "/layers/" + std::to_string(i));
    if (!l.ok()) return l.status();
    n.layers.push_back(*std::move(l));
  }
  return n;
}

}  // namespace

Json NetworkToJson(const Network& n) {
  Json j;
  j["name"] = n.name;
  j["source"] = n.source;
  if (!n.sample.empty()) j["sample"] = n.sample;
  if (n.published_params > 0) j["published_params"] = n.published_params;
  if (n.published_train_flops > 0) j["published_train_flops"] = n.published_train_flops;
  j["layers"] = Json::array();
  const NetLayer d;
  for (const NetLayer& l : n.layers) {
    Json x;
    x["op"] = LayerOpName(l.op);
    if (!l.name.empty()) x["name"] = l.name;
    if (l.op == LayerOp::kLinear) {
      x["tokens"] = l.tokens;
      x["in_features"] = l.in_channels;
      x["out_features"] = l.out_channels;
    } else if (l.op == LayerOp::kAttention) {
      x["tokens"] = l.tokens;
      x["kv_tokens"] = l.kv_tokens;
      x["heads"] = l.heads;
      x["head_dim"] = l.head_dim;
    } else {
      Json in = Json::array({l.in_channels});
      for (int k = 0; k < l.dims; ++k) in.push_back(l.extent[k]);
      x["in"] = in;
      if (l.op == LayerOp::kConv) x["out_channels"] = l.out_channels;
    }
    auto put = [&](const char* key, auto v, auto def) {
      if (v != def) x[key] = v;
    };
    put("kernel", l.kernel, d.kernel);
    put("stride", l.stride, d.stride);
    put("upsample", l.upsample, d.upsample);
    put("groups", l.groups, d.groups);
    put("transposed", l.transposed, d.transposed);
    put("bias", l.bias, d.bias);
    put("tensors", l.tensors, d.tensors);
    put("input_grad", l.input_grad, d.input_grad);
    put("frozen", l.frozen, d.frozen);
    put("weights_shared", l.weights_shared, d.weights_shared);
    put("checkpoint", l.checkpoint, d.checkpoint);
    put("repeat", l.repeat, d.repeat);
    if (l.tensor != d.tensor) x["tensor"] = TensorSplitName(l.tensor);
    j["layers"].push_back(x);
  }
  return j;
}

Result<Network> ParseNetwork(const Json& j, const std::string& pointer) {
  ObjectReader r(j, pointer);
  Network n;
  PT_RETURN_IF_ERROR(r.String("name", &n.name));
  PT_RETURN_IF_ERROR(r.String("source", &n.source));
  PT_RETURN_IF_ERROR(r.OptString("sample", &n.sample));
  PT_RETURN_IF_ERROR(r.OptNumber("published_params", &n.published_params));
  PT_RETURN_IF_ERROR(r.OptNumber("published_train_flops", &n.published_train_flops));
  r.Ignore("sources");  // per-number provenance, for readers
  if (n.name.empty() || n.source.empty()) return r.Error("name", "name and source must not be empty");
  const bool has_layers = r.Has("layers"), has_family = r.Has("family");
  if (has_layers == has_family) return r.Error("layers", "give either layers or family + architecture");
  if (has_layers) {
    n.family = "layers";
    auto out = ParseLayers(r, pointer, std::move(n));
    if (!out.ok()) return out.status();
    PT_RETURN_IF_ERROR(r.Finish());
    return out;
  }
  PT_RETURN_IF_ERROR(r.String("family", &n.family));
  if (!r.Has("architecture")) return r.Error("architecture", "is required with family");
  ObjectReader a(r.Raw("architecture"), r.PointerOf("architecture"));
  if (Status built = network_detail::BuildFamily(n.family, a, &n.layers); !built.ok()) {
    return built.code() == StatusCode::kNotFound ? r.Error("family", built.message()) : built;
  }
  PT_RETURN_IF_ERROR(a.Finish());
  PT_RETURN_IF_ERROR(r.Finish());
  n.spec = j;
  return n;
}

NetworkSize SizeOf(const Network& n) {
  NetworkSize out;
  if (n.spec.is_null() || !n.spec.contains("architecture")) return out;
  const Json& a = n.spec["architecture"];
  auto get = [&](const char* key, int64_t def) {
    return a.contains(key) && a[key].is_number_integer() ? a[key].get<int64_t>() : def;
  };
  auto list_size = [&](const char* key, int64_t def) {
    return a.contains(key) && a[key].is_array() ? static_cast<int64_t>(a[key].size()) : def;
  };
  if (n.family == "resnet") out = {"image", get("image", 224), 32};
  if (n.family == "retinanet") out = {"image", get("image", 800), 128};
  if (n.family == "unet2d") out = {"latent", get("latent", 64), int64_t{1} << (list_size("channel_mult", 4) - 1)};
  if (n.family == "dit") out = {"image_tokens", get("image_tokens", 256), 1};
  if (n.family == "vit") out = {"image", get("image", 224), get("patch", 16)};
  if (n.family == "deeplab") out = {"height", get("height", 768), 16};
  if (n.family == "video_dit") out = {"frames", get("frames", 21), get("patch_t", 1)};
  if (n.family == "unet3d") out = {"patch", get("patch", 128), int64_t{1} << list_size("filters", 5)};
  if (n.family == "cnn3d") out = {"volume", get("volume", 128), int64_t{1} << list_size("conv_filters", 5)};
  if (n.family == "gan") {
    out = {"image", get("image", 64),
           int64_t{1} << std::max(list_size("g_filters", 4), list_size("d_filters", 4))};
  }
  return out;
}

Result<Network> ResizeNetwork(const Network& n, int64_t value) {
  const NetworkSize size = SizeOf(n);
  if (size.key.empty()) {
    return Status::InvalidArgument("network '" + n.name + "' lists its layers: its input size cannot be varied");
  }
  if (value < size.step || value % size.step != 0) {
    return Status::InvalidArgument(size.key + " " + std::to_string(value) + " is not a positive multiple of " +
                                   std::to_string(size.step));
  }
  Json spec = n.spec;
  spec["architecture"][size.key] = value;
  return ParseNetwork(spec, "");
}

namespace {

const topology::PresetTable<Network>& Networks() {
  static const auto* table = new topology::PresetTable<Network>(EmbeddedPresets_networks(), "network", &ParseNetwork);
  return *table;
}

}  // namespace

std::vector<std::string> NetworkPresetNames() { return topology::PresetNames(EmbeddedPresets_networks()); }

Result<Network> NetworkPreset(const std::string& name) { return Networks().Find(name, "network"); }

Result<Network> ResolveNetwork(const Json& j, const std::string& pointer) {
  if (j.is_string()) return NetworkPreset(j.get<std::string>());
  if (j.is_object()) return ParseNetwork(j, pointer);
  return Status::InvalidArgument((pointer.empty() ? "/" : pointer) +
                                 ": must be a network preset name or a network object");
}

}  // namespace paratune::planner
