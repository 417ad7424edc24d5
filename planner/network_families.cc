// The family builders (network_families.h): each reads the handful of
// numbers its paper or reference code states and expands them into layers
// with their per-sample shapes.
#include "planner/network_families.h"

#include <algorithm>
#include <utility>

#include "topology/preset_util.h"

namespace paratune::planner::network_detail {

using Ext = std::array<int64_t, 3>;

// Reads a list of positive integers.
Status PositiveList(ObjectReader& r, std::string_view key, std::vector<int64_t>* out, bool required) {
  if (!r.Has(key)) {
    r.Ignore(key);
    return required ? r.Error(key, "is required") : Status::Ok();
  }
  const Json& v = r.Raw(key);
  if (!v.is_array() || v.empty() || v.size() > 64) return r.Error(key, "must be a list of 1 to 64 positive integers");
  out->clear();
  for (const Json& x : v) {
    if (!x.is_number_integer() || x.get<int64_t>() < 1 || x.get<int64_t>() > (int64_t{1} << 24)) {
      return r.Error(key, "must be a list of positive integers (at most 2^24)");
    }
    out->push_back(x.get<int64_t>());
  }
  return Status::Ok();
}

Status PositiveInt(ObjectReader& r, std::string_view key, int64_t* out, int64_t max) {
  PT_RETURN_IF_ERROR(r.OptInteger(key, out));
  if (*out < 1 || *out > max) return r.Error(key, "must be an integer in [1, " + std::to_string(max) + "]");
  return Status::Ok();
}

namespace {

// ---------------------------------------------------------------------------
// Layer constructors the family builders share.

NetLayer Conv(std::string name, int dims, Ext e, int64_t cin, int64_t cout, int kernel, int stride) {
  NetLayer l;
  l.op = LayerOp::kConv;
  l.name = std::move(name);
  l.dims = dims;
  l.extent = e;
  l.in_channels = cin;
  l.out_channels = cout;
  l.kernel = kernel;
  l.stride = stride;
  return l;
}

NetLayer Spatial(LayerOp op, std::string name, int dims, Ext e, int64_t c) {
  NetLayer l;
  l.op = op;
  l.name = std::move(name);
  l.dims = dims;
  l.extent = e;
  l.in_channels = c;
  l.out_channels = c;
  return l;
}

NetLayer Linear(std::string name, int64_t tokens, int64_t in, int64_t out, bool bias = true) {
  NetLayer l;
  l.op = LayerOp::kLinear;
  l.name = std::move(name);
  l.tokens = tokens;
  l.in_channels = in;
  l.out_channels = out;
  l.bias = bias;
  return l;
}

NetLayer Attention(std::string name, int64_t tokens, int64_t kv_tokens, int64_t heads, int64_t head_dim) {
  NetLayer l;
  l.op = LayerOp::kAttention;
  l.name = std::move(name);
  l.tokens = tokens;
  l.kv_tokens = kv_tokens;
  l.heads = heads;
  l.head_dim = head_dim;
  l.in_channels = heads * head_dim;
  l.out_channels = heads * head_dim;
  return l;
}

NetLayer Elementwise(std::string name, int dims, Ext e, int64_t c, double tensors) {
  NetLayer l = Spatial(LayerOp::kElementwise, std::move(name), dims, e, c);
  l.tensors = tensors;
  return l;
}

// `l` with its part under tensor parallelism.
NetLayer Split(NetLayer l, TensorSplit s) {
  l.tensor = s;
  return l;
}
constexpr TensorSplit kCol = TensorSplit::kColumn, kRowSplit = TensorSplit::kRow, kShard = TensorSplit::kSharded;

// Token rows as a one-dimensional extent, for norms and element-wise work on
// a transformer's activations.
NetLayer TokenOp(LayerOp op, std::string name, int64_t tokens, int64_t width, double tensors = 1) {
  NetLayer l = Spatial(op, std::move(name), 1, Ext{tokens, 1, 1}, width);
  l.tensors = tensors;
  return l;
}

// A repeated block's first layer: its input is what activation
// recomputation keeps (RecomputedLayers).
NetLayer Checkpoint(NetLayer l) {
  l.checkpoint = true;
  return l;
}

// A norm without its own scale and shift: adaLN's modulated LayerNorm
// (elementwise_affine=False), whose scale and shift come from a linear.
NetLayer Modulated(NetLayer norm) {
  norm.bias = false;
  return norm;
}

Ext Cube(int dims, int64_t side) {
  Ext e{1, 1, 1};
  for (int d = 0; d < dims; ++d) e[d] = side;
  return e;
}

// ---------------------------------------------------------------------------
// ResNet (He et al. 2016) with torchvision's v1.5 bottleneck (stride on the
// 3×3 convolution) and ResNeXt's grouped width (Xie et al. 2017): stem,
// stages of bottlenecks, and (with a classifier) pooling and the dense layer.
// Every convolution is followed by a batch norm (ReLU fused where it follows).

struct ResNetArch {
  std::vector<int64_t> blocks{3, 4, 6, 3};
  int64_t groups = 1, width_per_group = 64, image = 224, channels = 3, classes = 1000;
  int64_t frozen_stages = 0;  // stem and this many stages train no weights (detection backbones)
  bool frozen_norm = false;   // FrozenBatchNorm2d: a fixed affine map, no statistics (torchvision detection)
};

struct StageOutput {
  Ext extent;
  int64_t channels;
};

std::vector<StageOutput> BuildResNetBackbone(const ResNetArch& a, std::vector<NetLayer>* out) {
  Ext e = Cube(2, a.image);
  auto conv = [&](std::string name, int64_t cin, int64_t cout, int k, int s, bool frozen) {
    NetLayer c = Conv(std::move(name), 2, e, cin, cout, k, s);
    c.bias = false;
    c.frozen = frozen;
    out->push_back(c);
    e = c.OutExtent();
    NetLayer n = a.frozen_norm ? Elementwise(out->back().name + ".bn", 2, e, cout, 1)
                               : Spatial(LayerOp::kNorm, out->back().name + ".bn", 2, e, cout);
    n.frozen = frozen;
    out->push_back(n);
  };
  const bool stem_frozen = a.frozen_stages > 0;
  conv("stem.conv", a.channels, 64, 7, 2, stem_frozen);
  out->front().input_grad = false;
  out->push_back(Spatial(LayerOp::kResample, "stem.maxpool", 2, e, 64));
  out->back().stride = 2;
  e = out->back().OutExtent();
  int64_t in = 64;
  std::vector<StageOutput> stages;
  for (size_t s = 0; s < a.blocks.size(); ++s) {
    const int64_t planes = int64_t{64} << s;
    const int64_t width = planes * a.width_per_group / 64 * a.groups;
    const int64_t outc = planes * 4;
    const bool frozen = static_cast<int64_t>(s) + 1 < a.frozen_stages;
    for (int64_t b = 0; b < a.blocks[s]; ++b) {
      const std::string p = "stage" + std::to_string(s + 1) + ".block" + std::to_string(b + 1);
      const int stride = (b == 0 && s > 0) ? 2 : 1;
      const Ext block_in = e;
      conv(p + ".conv1", in, width, 1, 1, frozen);
      conv(p + ".conv2", width, width, 3, stride, frozen);
      out->at(out->size() - 2).groups = static_cast<int>(a.groups);
      conv(p + ".conv3", width, outc, 1, 1, frozen);
      if (b == 0) {
        const Ext after = e;
        e = block_in;
        conv(p + ".downsample", in, outc, 1, stride, frozen);
        e = after;
      }
      out->push_back(Elementwise(p + ".add_relu", 2, e, outc, 2));
      in = outc;
    }
    stages.push_back({e, in});
  }
  return stages;
}

Status ReadResNet(ObjectReader& r, ResNetArch* a) {
  PT_RETURN_IF_ERROR(PositiveList(r, "blocks", &a->blocks, true));
  PT_RETURN_IF_ERROR(PositiveInt(r, "groups", &a->groups, 1024));
  PT_RETURN_IF_ERROR(PositiveInt(r, "width_per_group", &a->width_per_group, 4096));
  PT_RETURN_IF_ERROR(PositiveInt(r, "image", &a->image, 65536));
  PT_RETURN_IF_ERROR(PositiveInt(r, "channels", &a->channels, 4096));
  PT_RETURN_IF_ERROR(PositiveInt(r, "classes", &a->classes, int64_t{1} << 20));
  PT_RETURN_IF_ERROR(r.OptInteger("frozen_stages", &a->frozen_stages));
  PT_RETURN_IF_ERROR(r.OptBool("frozen_norm", &a->frozen_norm));
  if (a->frozen_stages < 0 || a->frozen_stages > static_cast<int64_t>(a->blocks.size()) + 1) {
    return r.Error("frozen_stages", "must be between 0 and the number of stages + 1");
  }
  return Status::Ok();
}

Status BuildResNet(ObjectReader& r, std::vector<NetLayer>* out) {
  ResNetArch a;
  PT_RETURN_IF_ERROR(ReadResNet(r, &a));
  const std::vector<StageOutput> stages = BuildResNetBackbone(a, out);
  out->push_back(Spatial(LayerOp::kResample, "avgpool", 2, stages.back().extent, stages.back().channels));
  out->push_back(Linear("fc", 1, stages.back().channels, a.classes));
  return Status::Ok();
}

// RetinaNet (Lin et al. 2017) as torchvision builds it: a ResNet/ResNeXt
// backbone, an FPN on C3-C5 with P6 and P7 from P5 (LastLevelP6P7), and the
// classification and box heads (head_convs 3×3 convolutions each, then the
// predictor) shared across the five levels.
Status BuildRetinaNet(ObjectReader& r, std::vector<NetLayer>* out) {
  ResNetArch a;
  int64_t anchors = 9, fpn = 256, head_convs = 4;
  PT_RETURN_IF_ERROR(ReadResNet(r, &a));
  PT_RETURN_IF_ERROR(PositiveInt(r, "anchors", &anchors, 1024));
  PT_RETURN_IF_ERROR(PositiveInt(r, "fpn_channels", &fpn, 65536));
  PT_RETURN_IF_ERROR(PositiveInt(r, "head_convs", &head_convs, 64));
  if (a.blocks.size() < 4) return r.Error("blocks", "a RetinaNet backbone needs four stages (C2-C5)");
  const std::vector<StageOutput> c = BuildResNetBackbone(a, out);
  std::vector<Ext> levels;
  for (size_t s = 1; s < 4; ++s) {
    const std::string p = "fpn.P" + std::to_string(s + 2);
    out->push_back(Conv(p + ".lateral", 2, c[s].extent, c[s].channels, fpn, 1, 1));
    out->push_back(Conv(p + ".output", 2, c[s].extent, fpn, fpn, 3, 1));
    levels.push_back(c[s].extent);
  }
  for (int p = 6; p <= 7; ++p) {
    NetLayer l = Conv("fpn.P" + std::to_string(p), 2, levels.back(), fpn, fpn, 3, 2);
    levels.push_back(l.OutExtent());
    out->push_back(l);
  }
  for (size_t lv = 0; lv < levels.size(); ++lv) {
    const std::string suffix = ".P" + std::to_string(lv + 3);
    for (const char* head : {"cls", "box"}) {
      const int64_t pred = std::string(head) == "cls" ? anchors * a.classes : anchors * 4;
      for (int64_t i = 0; i < head_convs; ++i) {
        NetLayer l = Conv(std::string("head.") + head + ".conv" + std::to_string(i + 1) + suffix, 2,
                          levels[lv], fpn, fpn, 3, 1);
        l.weights_shared = lv > 0;
        out->push_back(l);
        out->push_back(Spatial(LayerOp::kElementwise, l.name + ".relu", 2, levels[lv], fpn));
      }
      NetLayer l = Conv(std::string("head.") + head + ".predict" + suffix, 2, levels[lv], fpn, pred, 3, 1);
      l.weights_shared = lv > 0;
      out->push_back(l);
    }
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// The latent-diffusion U-Net (Rombach et al. 2022; CompVis/Stability
// openaimodel.py UNetModel with SpatialTransformer): residual blocks with the
// timestep embedding, transformer blocks (self- and cross-attention, GEGLU
// feed-forward) at the listed levels, skip connections concatenated on the
// way up. Optionally the frozen text encoder's forward (it runs every step).

struct UNet2dArch {
  int64_t latent = 64, in_channels = 4, out_channels = 4, model_channels = 320;
  std::vector<int64_t> channel_mult{1, 2, 4, 4};
  int64_t num_res_blocks = 2;
  std::vector<int64_t> attention_levels{0, 1, 2};
  int64_t head_channels = 64, context_dim = 1024, context_tokens = 77;
  // Transformer blocks per SpatialTransformer at each level (down and up
  // alike) and in the middle block (sgm's openaimodel.py: an integer applies
  // to every level; the middle defaults to the last level's depth).
  std::vector<int64_t> transformer_depth{1, 1, 1, 1};
  int64_t transformer_depth_middle = 0;  // 0: transformer_depth's last
  // The added conditioning vector (SDXL's size and crop embeddings beside the
  // pooled text embedding): label_emb, two linears into the time embedding.
  int64_t adm_in_channels = 0;
  int64_t text_encoder_layers = 0, text_encoder_width = 0;  // 0: conditioning precomputed
};

void ResBlock2d(const std::string& p, Ext e, int64_t cin, int64_t cout, int64_t emb,
                std::vector<NetLayer>* out) {
  out->push_back(Spatial(LayerOp::kNorm, p + ".in_norm", 2, e, cin));
  out->push_back(Conv(p + ".conv1", 2, e, cin, cout, 3, 1));
  out->push_back(Linear(p + ".emb", 1, emb, cout));
  out->push_back(Spatial(LayerOp::kNorm, p + ".out_norm", 2, e, cout));
  out->push_back(Conv(p + ".conv2", 2, e, cout, cout, 3, 1));
  if (cin != cout) out->push_back(Conv(p + ".skip", 2, e, cin, cout, 1, 1));
  out->push_back(Elementwise(p + ".add", 2, e, cout, 2));
}

void SpatialTransformer(const std::string& p, Ext e, int64_t c, int64_t depth, const UNet2dArch& a,
                        std::vector<NetLayer>* out) {
  const int64_t t = e[0] * e[1];
  const int64_t heads = c / a.head_channels;
  out->push_back(Spatial(LayerOp::kNorm, p + ".norm", 2, e, c));
  out->push_back(Linear(p + ".proj_in", t, c, c));
  // The `depth` blocks are identical: each layer once, repeated.
  const std::string b = p + (depth == 1 ? ".block1" : ".blocks");
  const size_t first = out->size();
  out->push_back(Checkpoint(TokenOp(LayerOp::kNorm, b + ".norm1", t, c)));
  out->push_back(Split(Linear(b + ".attn1.qkv", t, c, 3 * c, false), kCol));
  out->push_back(Split(Attention(b + ".attn1", t, t, heads, a.head_channels), kShard));
  out->push_back(Split(Linear(b + ".attn1.out", t, c, c), kRowSplit));
  out->push_back(TokenOp(LayerOp::kElementwise, b + ".add1", t, c, 2));
  out->push_back(TokenOp(LayerOp::kNorm, b + ".norm2", t, c));
  out->push_back(Split(Linear(b + ".attn2.q", t, c, c, false), kCol));
  NetLayer kv = Split(Linear(b + ".attn2.kv", a.context_tokens, a.context_dim, 2 * c, false), kCol);
  kv.input_grad = false;  // the text context is not trained
  out->push_back(kv);
  out->push_back(Split(Attention(b + ".attn2", t, a.context_tokens, heads, a.head_channels), kShard));
  out->push_back(Split(Linear(b + ".attn2.out", t, c, c), kRowSplit));
  out->push_back(TokenOp(LayerOp::kElementwise, b + ".add2", t, c, 2));
  out->push_back(TokenOp(LayerOp::kNorm, b + ".norm3", t, c));
  out->push_back(Split(Linear(b + ".ff.geglu", t, c, 8 * c), kCol));
  out->push_back(Split(TokenOp(LayerOp::kElementwise, b + ".ff.gate", t, 4 * c, 2), kShard));
  out->push_back(Split(Linear(b + ".ff.out", t, 4 * c, c), kRowSplit));
  out->push_back(TokenOp(LayerOp::kElementwise, b + ".add3", t, c, 2));
  for (size_t i = first; i < out->size(); ++i) (*out)[i].repeat = depth;
  out->push_back(Linear(p + ".proj_out", t, c, c));
  out->push_back(Elementwise(p + ".add", 2, e, c, 2));
}

// A frozen pre-LN text transformer's forward (OpenCLIP/CLIP text towers):
// QKV, output and 4× MLP projections per layer over the context tokens.
void FrozenTextEncoder(int64_t layers, int64_t width, int64_t tokens, int64_t head_channels,
                       std::vector<NetLayer>* out) {
  std::vector<NetLayer> block = {
      TokenOp(LayerOp::kNorm, "text.ln1", tokens, width),
      Linear("text.qkv", tokens, width, 3 * width),
      Attention("text.attn", tokens, tokens, width / head_channels, head_channels),
      Linear("text.attn_out", tokens, width, width),
      TokenOp(LayerOp::kNorm, "text.ln2", tokens, width),
      Linear("text.mlp_in", tokens, width, 4 * width),
      TokenOp(LayerOp::kElementwise, "text.gelu", tokens, 4 * width),
      Linear("text.mlp_out", tokens, 4 * width, width)};
  for (NetLayer& l : block) {
    l.frozen = true;
    l.input_grad = false;
    l.repeat = layers;
    out->push_back(l);
  }
}

// `transformer_depth`: one depth for every level, or a list of one per level
// of channel_mult; `transformer_depth_middle` defaults to the last level's.
Status ReadTransformerDepth(ObjectReader& r, UNet2dArch* a) {
  const size_t levels = a->channel_mult.size();
  if (r.Has("transformer_depth") && r.Raw("transformer_depth").is_array()) {
    std::vector<int64_t> depths;
    PT_RETURN_IF_ERROR(PositiveList(r, "transformer_depth", &depths, true));
    if (depths.size() != levels) {
      return r.Error("transformer_depth", "a list needs one depth per level of channel_mult");
    }
    a->transformer_depth = depths;
  } else {
    int64_t depth = 1;
    PT_RETURN_IF_ERROR(PositiveInt(r, "transformer_depth", &depth, 64));
    a->transformer_depth.assign(levels, depth);
  }
  for (int64_t d : a->transformer_depth) {
    if (d > 64) return r.Error("transformer_depth", "at most 64 blocks per level");
  }
  a->transformer_depth_middle = a->transformer_depth.back();
  return PositiveInt(r, "transformer_depth_middle", &a->transformer_depth_middle, 64);
}

Status BuildUNet2d(ObjectReader& r, std::vector<NetLayer>* out) {
  UNet2dArch a;
  PT_RETURN_IF_ERROR(PositiveInt(r, "latent", &a.latent, 65536));
  PT_RETURN_IF_ERROR(PositiveInt(r, "in_channels", &a.in_channels, 4096));
  PT_RETURN_IF_ERROR(PositiveInt(r, "out_channels", &a.out_channels, 4096));
  PT_RETURN_IF_ERROR(PositiveInt(r, "model_channels", &a.model_channels, 65536));
  PT_RETURN_IF_ERROR(PositiveList(r, "channel_mult", &a.channel_mult, true));
  PT_RETURN_IF_ERROR(PositiveInt(r, "num_res_blocks", &a.num_res_blocks, 64));
  if (r.Has("attention_levels") && r.Raw("attention_levels").is_array() && r.Raw("attention_levels").empty()) {
    a.attention_levels.clear();
    r.Ignore("attention_levels");
  } else {
    std::vector<int64_t> levels;
    PT_RETURN_IF_ERROR(PositiveList(r, "attention_levels", &levels, false));
    // Levels are 1-based in the file (level 1 = full resolution).
    if (!levels.empty()) {
      a.attention_levels.clear();
      for (int64_t l : levels) {
        if (l > static_cast<int64_t>(a.channel_mult.size())) {
          return r.Error("attention_levels", "names a level past channel_mult");
        }
        a.attention_levels.push_back(l - 1);
      }
    }
  }
  PT_RETURN_IF_ERROR(PositiveInt(r, "head_channels", &a.head_channels, 4096));
  PT_RETURN_IF_ERROR(PositiveInt(r, "context_dim", &a.context_dim, 65536));
  PT_RETURN_IF_ERROR(PositiveInt(r, "context_tokens", &a.context_tokens, 1 << 20));
  PT_RETURN_IF_ERROR(ReadTransformerDepth(r, &a));
  PT_RETURN_IF_ERROR(r.OptInteger("adm_in_channels", &a.adm_in_channels));
  if (a.adm_in_channels < 0 || a.adm_in_channels > 65536) {
    return r.Error("adm_in_channels", "must be in [0, 65536] (0: no added conditioning)");
  }
  PT_RETURN_IF_ERROR(r.OptInteger("text_encoder_layers", &a.text_encoder_layers));
  PT_RETURN_IF_ERROR(r.OptInteger("text_encoder_width", &a.text_encoder_width));
  if ((a.text_encoder_layers > 0) != (a.text_encoder_width > 0) || a.text_encoder_layers < 0 ||
      a.text_encoder_width < 0 || a.text_encoder_layers > 256 ||
      a.text_encoder_width % a.head_channels != 0) {
    return r.Error("text_encoder_layers",
                   "text_encoder_layers and text_encoder_width go together (width a multiple of "
                   "head_channels)");
  }
  for (int64_t m : a.channel_mult) {
    if (a.model_channels * m % a.head_channels != 0) {
      return r.Error("head_channels", "must divide every level's channels");
    }
  }
  if (a.text_encoder_layers > 0) {
    FrozenTextEncoder(a.text_encoder_layers, a.text_encoder_width, a.context_tokens, a.head_channels, out);
  }
  const int64_t emb = 4 * a.model_channels;
  out->push_back(Linear("time_embed.1", 1, a.model_channels, emb));
  out->push_back(Linear("time_embed.2", 1, emb, emb));
  if (a.adm_in_channels > 0) {
    out->push_back(Linear("label_emb.1", 1, a.adm_in_channels, emb));
    out->push_back(Linear("label_emb.2", 1, emb, emb));
  }
  Ext e = Cube(2, a.latent);
  out->push_back(Conv("input.conv", 2, e, a.in_channels, a.model_channels, 3, 1));
  out->back().input_grad = false;
  const auto attends = [&](size_t level) {
    return std::find(a.attention_levels.begin(), a.attention_levels.end(), static_cast<int64_t>(level)) !=
           a.attention_levels.end();
  };
  std::vector<int64_t> skips{a.model_channels};
  int64_t ch = a.model_channels;
  const size_t nlev = a.channel_mult.size();
  for (size_t lv = 0; lv < nlev; ++lv) {
    for (int64_t b = 0; b < a.num_res_blocks; ++b) {
      const std::string p = "down" + std::to_string(lv + 1) + ".res" + std::to_string(b + 1);
      const int64_t cout = a.model_channels * a.channel_mult[lv];
      ResBlock2d(p, e, ch, cout, emb, out);
      ch = cout;
      if (attends(lv)) SpatialTransformer(p + ".attn", e, ch, a.transformer_depth[lv], a, out);
      skips.push_back(ch);
    }
    if (lv + 1 < nlev) {
      out->push_back(Conv("down" + std::to_string(lv + 1) + ".downsample", 2, e, ch, ch, 3, 2));
      e = out->back().OutExtent();
      skips.push_back(ch);
    }
  }
  ResBlock2d("mid.res1", e, ch, ch, emb, out);
  SpatialTransformer("mid.attn", e, ch, a.transformer_depth_middle, a, out);
  ResBlock2d("mid.res2", e, ch, ch, emb, out);
  for (size_t i = 0; i < nlev; ++i) {
    const size_t lv = nlev - 1 - i;
    for (int64_t b = 0; b <= a.num_res_blocks; ++b) {
      const std::string p = "up" + std::to_string(lv + 1) + ".res" + std::to_string(b + 1);
      const int64_t skip = skips.back();
      skips.pop_back();
      out->push_back(Spatial(LayerOp::kResample, p + ".concat", 2, e, ch + skip));
      const int64_t cout = a.model_channels * a.channel_mult[lv];
      ResBlock2d(p, e, ch + skip, cout, emb, out);
      ch = cout;
      if (attends(lv)) SpatialTransformer(p + ".attn", e, ch, a.transformer_depth[lv], a, out);
    }
    if (lv > 0) {
      NetLayer up = Spatial(LayerOp::kResample, "up" + std::to_string(lv + 1) + ".upsample", 2, e, ch);
      up.upsample = 2;
      out->push_back(up);
      e = up.OutExtent();
      out->push_back(Conv("up" + std::to_string(lv + 1) + ".upsample.conv", 2, e, ch, ch, 3, 1));
    }
  }
  out->push_back(Spatial(LayerOp::kNorm, "out.norm", 2, e, ch));
  out->push_back(Conv("out.conv", 2, e, ch, a.out_channels, 3, 1));
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// A FLUX-style multimodal diffusion transformer (Black Forest Labs' flux
// model.py: DoubleStreamBlock, SingleStreamBlock): double-stream blocks keep
// separate weights for image and text tokens and attend jointly; single-stream
// blocks run one fused QKV+MLP projection over all tokens; each block's
// adaptive norm is modulated from the pooled conditioning vector.

Status BuildDiT(ObjectReader& r, std::vector<NetLayer>* out) {
  int64_t hidden = 3072, heads = 24, dbl = 19, sgl = 38, mlp_ratio = 4, img = 256, txt = 256;
  int64_t in_ch = 64, txt_dim = 4096, vec_dim = 768, time_dim = 256;
  PT_RETURN_IF_ERROR(PositiveInt(r, "hidden", &hidden, 1 << 20));
  PT_RETURN_IF_ERROR(PositiveInt(r, "heads", &heads, 4096));
  PT_RETURN_IF_ERROR(r.OptInteger("double_blocks", &dbl));
  PT_RETURN_IF_ERROR(r.OptInteger("single_blocks", &sgl));
  PT_RETURN_IF_ERROR(PositiveInt(r, "mlp_ratio", &mlp_ratio, 64));
  PT_RETURN_IF_ERROR(PositiveInt(r, "image_tokens", &img, 1 << 24));
  PT_RETURN_IF_ERROR(r.OptInteger("text_tokens", &txt));
  PT_RETURN_IF_ERROR(PositiveInt(r, "in_channels", &in_ch, 1 << 20));
  PT_RETURN_IF_ERROR(PositiveInt(r, "text_dim", &txt_dim, 1 << 20));
  PT_RETURN_IF_ERROR(PositiveInt(r, "vec_dim", &vec_dim, 1 << 20));
  PT_RETURN_IF_ERROR(PositiveInt(r, "time_dim", &time_dim, 1 << 20));
  // FLUX normalises queries and keys (RMSNorm); SD3's MMDiT does not, and its
  // last block keeps only the text stream's attention inputs (context_pre_only).
  bool qk_norm = true, text_pre_only_last = false;
  PT_RETURN_IF_ERROR(r.OptBool("qk_norm", &qk_norm));
  PT_RETURN_IF_ERROR(r.OptBool("text_pre_only_last", &text_pre_only_last));
  if (hidden % heads != 0) return r.Error("heads", "must divide hidden");
  if (text_pre_only_last && dbl == 0) return r.Error("text_pre_only_last", "needs double-stream blocks");
  if (dbl < 0 || sgl < 0 || dbl + sgl < 1 || dbl + sgl > 4096) {
    return r.Error("double_blocks", "double_blocks + single_blocks must be in [1, 4096]");
  }
  if (txt < 0 || txt > (1 << 24) || (dbl > 0 && txt == 0)) {
    return r.Error("text_tokens", "must be in [0, 2^24], positive with double-stream blocks");
  }
  const int64_t hd = hidden / heads, mlp = mlp_ratio * hidden, all = img + txt;
  out->push_back(Linear("img_in", img, in_ch, hidden));
  out->back().input_grad = false;
  if (txt > 0) {
    out->push_back(Linear("txt_in", txt, txt_dim, hidden));
    out->back().input_grad = false;
  }
  for (auto [name, in] : {std::pair{"time_in", time_dim}, std::pair{"vector_in", vec_dim}}) {
    out->push_back(Linear(std::string(name) + ".1", 1, in, hidden));
    out->push_back(Linear(std::string(name) + ".2", 1, hidden, hidden));
  }
  auto push = [&](NetLayer l, int64_t repeat) {
    l.repeat = repeat;
    out->push_back(std::move(l));
  };
  if (dbl > 0) {
    for (auto [stream, t] : {std::pair{"img", img}, std::pair{"txt", txt}}) {
      const std::string p = std::string("double.") + stream;
      // Blocks running the stream's output half (projection and MLP).
      const int64_t full = text_pre_only_last && std::string_view(stream) == "txt" ? dbl - 1 : dbl;
      if (full > 0) push(Linear(p + ".mod", 1, hidden, 6 * hidden), full);
      push(Checkpoint(Modulated(TokenOp(LayerOp::kNorm, p + ".norm1", t, hidden))), dbl);
      push(Split(Linear(p + ".qkv", t, hidden, 3 * hidden), kCol), dbl);
      if (qk_norm) push(Split(TokenOp(LayerOp::kNorm, p + ".qk_norm", t, 2 * hidden), kShard), dbl);
      if (full == 0) continue;
      push(Split(Linear(p + ".proj", t, hidden, hidden), kRowSplit), full);
      push(TokenOp(LayerOp::kElementwise, p + ".gate1", t, hidden, 3), full);
      push(Modulated(TokenOp(LayerOp::kNorm, p + ".norm2", t, hidden)), full);
      push(Split(Linear(p + ".mlp_in", t, hidden, mlp), kCol), full);
      push(Split(TokenOp(LayerOp::kElementwise, p + ".gelu", t, mlp), kShard), full);
      push(Split(Linear(p + ".mlp_out", t, mlp, hidden), kRowSplit), full);
      push(TokenOp(LayerOp::kElementwise, p + ".gate2", t, hidden, 3), full);
    }
    push(Split(Attention("double.attn", all, all, heads, hd), kShard), dbl);
    // After the stack, so that the stack's layers stay one run of repeats.
    if (text_pre_only_last) push(Linear("double.txt.mod_pre_only", 1, hidden, 2 * hidden), 1);
  }
  if (sgl > 0) {
    push(Linear("single.mod", 1, hidden, 3 * hidden), sgl);
    push(Checkpoint(Modulated(TokenOp(LayerOp::kNorm, "single.norm", all, hidden))), sgl);
    push(Split(Linear("single.linear1", all, hidden, 3 * hidden + mlp), kCol), sgl);
    if (qk_norm) push(Split(TokenOp(LayerOp::kNorm, "single.qk_norm", all, 2 * hidden), kShard), sgl);
    push(Split(Attention("single.attn", all, all, heads, hd), kShard), sgl);
    push(Split(TokenOp(LayerOp::kElementwise, "single.gelu", all, mlp), kShard), sgl);
    push(Split(Linear("single.linear2", all, hidden + mlp, hidden), kRowSplit), sgl);
    push(TokenOp(LayerOp::kElementwise, "single.gate", all, hidden, 3), sgl);
  }
  out->push_back(Linear("final.mod", 1, hidden, 2 * hidden));
  out->push_back(Modulated(TokenOp(LayerOp::kNorm, "final.norm", img, hidden)));
  out->push_back(Linear("final.linear", img, hidden, in_ch));
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// A video diffusion transformer as Wan2.1 builds it (Wan-Video/Wan2.1 9737cba,
// wan/modules/model.py WanModel): the VAE latent cut into tubelets (a
// patch-embedding convolution), text tokens embedded by a two-layer MLP, and
// per block self-attention over every tubelet (modulated norm, Q/K RMSNorm),
// cross-attention to the text tokens (affine norm, ungated) and a GELU
// feed-forward; the time embedding's modulation is one shared projection.
// Not counted: each block's learned modulation offset and the Q/K RMSNorm
// scales (parameters without compute; 0.015 % of Wan2.1-14B).

Status BuildVideoDiT(ObjectReader& r, std::vector<NetLayer>* out) {
  int64_t frames = 21, height = 60, width = 104, patch_t = 1, patch = 2, in_ch = 16, out_ch = 16;
  int64_t hidden = 5120, heads = 40, layers = 40, ffn = 13824, txt = 512, txt_dim = 4096, time_dim = 256;
  PT_RETURN_IF_ERROR(PositiveInt(r, "frames", &frames, 4096));
  PT_RETURN_IF_ERROR(PositiveInt(r, "height", &height, 65536));
  PT_RETURN_IF_ERROR(PositiveInt(r, "width", &width, 65536));
  PT_RETURN_IF_ERROR(PositiveInt(r, "patch_t", &patch_t, 64));
  PT_RETURN_IF_ERROR(PositiveInt(r, "patch", &patch, 64));
  PT_RETURN_IF_ERROR(PositiveInt(r, "in_channels", &in_ch, 4096));
  PT_RETURN_IF_ERROR(PositiveInt(r, "out_channels", &out_ch, 4096));
  PT_RETURN_IF_ERROR(PositiveInt(r, "hidden", &hidden, 1 << 20));
  PT_RETURN_IF_ERROR(PositiveInt(r, "heads", &heads, 4096));
  PT_RETURN_IF_ERROR(PositiveInt(r, "layers", &layers, 4096));
  PT_RETURN_IF_ERROR(PositiveInt(r, "ffn", &ffn, 1 << 22));
  PT_RETURN_IF_ERROR(PositiveInt(r, "text_tokens", &txt, 1 << 20));
  PT_RETURN_IF_ERROR(PositiveInt(r, "text_dim", &txt_dim, 1 << 20));
  PT_RETURN_IF_ERROR(PositiveInt(r, "time_dim", &time_dim, 1 << 20));
  if (hidden % heads != 0) return r.Error("heads", "must divide hidden");
  if (frames % patch_t != 0) return r.Error("patch_t", "must divide frames");
  if (height % patch != 0 || width % patch != 0) return r.Error("patch", "must divide height and width");
  const int64_t t = frames / patch_t * (height / patch) * (width / patch), hd = hidden / heads;
  if (t > (int64_t{1} << 24)) return r.Error("frames", "gives more than 2^24 tokens");
  const int64_t tubelet = in_ch * patch_t * patch * patch;
  out->push_back(Linear("patch_embed", t, tubelet, hidden));
  out->back().input_grad = false;
  out->push_back(Linear("text_embed.1", txt, txt_dim, hidden));
  out->back().input_grad = false;
  out->push_back(TokenOp(LayerOp::kElementwise, "text_embed.gelu", txt, hidden));
  out->push_back(Linear("text_embed.2", txt, hidden, hidden));
  out->push_back(Linear("time_embed.1", 1, time_dim, hidden));
  out->push_back(Linear("time_embed.2", 1, hidden, hidden));
  out->push_back(Linear("time_projection", 1, hidden, 6 * hidden));
  const size_t first = out->size();
  for (NetLayer l : {Checkpoint(Modulated(TokenOp(LayerOp::kNorm, "block.norm1", t, hidden))),
                     Split(Linear("block.self.qkv", t, hidden, 3 * hidden), kCol),
                     Split(Modulated(TokenOp(LayerOp::kNorm, "block.self.qk_norm", t, 2 * hidden)), kShard),
                     Split(Attention("block.self.attn", t, t, heads, hd), kShard),
                     Split(Linear("block.self.out", t, hidden, hidden), kRowSplit),
                     TokenOp(LayerOp::kElementwise, "block.gate1", t, hidden, 3),
                     TokenOp(LayerOp::kNorm, "block.norm3", t, hidden),
                     Split(Linear("block.cross.q", t, hidden, hidden), kCol),
                     Split(Linear("block.cross.kv", txt, hidden, 2 * hidden), kCol),
                     Split(Modulated(TokenOp(LayerOp::kNorm, "block.cross.q_norm", t, hidden)), kShard),
                     Split(Attention("block.cross.attn", t, txt, heads, hd), kShard),
                     Split(Linear("block.cross.out", t, hidden, hidden), kRowSplit),
                     TokenOp(LayerOp::kElementwise, "block.add2", t, hidden, 2),
                     Modulated(TokenOp(LayerOp::kNorm, "block.norm2", t, hidden)),
                     Split(Linear("block.ffn.1", t, hidden, ffn), kCol),
                     Split(TokenOp(LayerOp::kElementwise, "block.ffn.gelu", t, ffn), kShard),
                     Split(Linear("block.ffn.2", t, ffn, hidden), kRowSplit),
                     TokenOp(LayerOp::kElementwise, "block.gate3", t, hidden, 3)}) {
    out->push_back(l);
  }
  for (size_t i = first; i < out->size(); ++i) (*out)[i].repeat = layers;
  out->push_back(Modulated(TokenOp(LayerOp::kNorm, "head.norm", t, hidden)));
  out->push_back(Linear("head.linear", t, hidden, out_ch * patch_t * patch * patch));
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// A vision transformer (Dosovitskiy et al. 2021): a patch-embedding
// convolution (kernel = stride = patch), pre-norm blocks (QKV, attention,
// projection; MLP with GELU), and a classifier on the class token; with
// `adaln`, a diffusion transformer as Peebles & Xie build it (DiT: adaLN-Zero
// modulation of every block from the timestep and class embeddings, the
// final layer unpatchifying to out_channels per pixel, no class token).

Status BuildViT(ObjectReader& r, std::vector<NetLayer>* out) {
  int64_t image = 224, patch = 16, channels = 3, hidden = 1024, heads = 16, layers = 24, mlp_ratio = 4;
  int64_t classes = 1000, out_channels = 0, time_dim = 256;
  bool adaln = false;
  PT_RETURN_IF_ERROR(PositiveInt(r, "image", &image, 65536));
  PT_RETURN_IF_ERROR(PositiveInt(r, "patch", &patch, 1024));
  PT_RETURN_IF_ERROR(PositiveInt(r, "channels", &channels, 4096));
  PT_RETURN_IF_ERROR(PositiveInt(r, "hidden", &hidden, 1 << 20));
  PT_RETURN_IF_ERROR(PositiveInt(r, "heads", &heads, 4096));
  PT_RETURN_IF_ERROR(PositiveInt(r, "layers", &layers, 4096));
  PT_RETURN_IF_ERROR(PositiveInt(r, "mlp_ratio", &mlp_ratio, 64));
  PT_RETURN_IF_ERROR(r.OptInteger("classes", &classes));
  PT_RETURN_IF_ERROR(r.OptBool("adaln", &adaln));
  PT_RETURN_IF_ERROR(r.OptInteger("out_channels", &out_channels));
  PT_RETURN_IF_ERROR(PositiveInt(r, "time_dim", &time_dim, 1 << 20));
  if (hidden % heads != 0) return r.Error("heads", "must divide hidden");
  if (image % patch != 0) return r.Error("patch", "must divide image");
  if (classes < 0 || classes > (1 << 20)) return r.Error("classes", "must be in [0, 2^20]");
  if (out_channels < 0 || out_channels > 4096 || (adaln && out_channels == 0)) {
    return r.Error("out_channels", "must be in [1, 4096] with adaln (the channels predicted per pixel)");
  }
  const int64_t side = image / patch, hd = hidden / heads, mlp = mlp_ratio * hidden;
  const int64_t tokens = side * side + (adaln || classes == 0 ? 0 : 1);  // the class token
  NetLayer embed = Conv("patch_embed", 2, Cube(2, image), channels, hidden, static_cast<int>(patch),
                        static_cast<int>(patch));
  embed.input_grad = false;
  out->push_back(embed);
  if (adaln) {
    out->push_back(Linear("t_embed.1", 1, time_dim, hidden));
    out->push_back(Linear("t_embed.2", 1, hidden, hidden));
  }
  std::vector<NetLayer> block;
  if (adaln) block.push_back(Linear("block.adaln", 1, hidden, 6 * hidden));
  auto norm = [&](const char* name) {
    NetLayer l = TokenOp(LayerOp::kNorm, name, tokens, hidden);
    return adaln ? Modulated(l) : l;
  };
  for (NetLayer l : {Checkpoint(norm("block.norm1")),
                     Split(Linear("block.qkv", tokens, hidden, 3 * hidden), kCol),
                     Split(Attention("block.attn", tokens, tokens, heads, hd), kShard),
                     Split(Linear("block.proj", tokens, hidden, hidden), kRowSplit),
                     TokenOp(LayerOp::kElementwise, "block.add1", tokens, hidden, adaln ? 3 : 2),
                     norm("block.norm2"),
                     Split(Linear("block.fc1", tokens, hidden, mlp), kCol),
                     Split(TokenOp(LayerOp::kElementwise, "block.gelu", tokens, mlp), kShard),
                     Split(Linear("block.fc2", tokens, mlp, hidden), kRowSplit),
                     TokenOp(LayerOp::kElementwise, "block.add2", tokens, hidden, adaln ? 3 : 2)}) {
    block.push_back(l);
  }
  for (NetLayer& l : block) {
    l.repeat = layers;
    out->push_back(l);
  }
  if (adaln) {
    out->push_back(Linear("final.adaln", 1, hidden, 2 * hidden));
    out->push_back(Modulated(TokenOp(LayerOp::kNorm, "final.norm", tokens, hidden)));
    out->push_back(Linear("final.linear", tokens, hidden, patch * patch * out_channels));
  } else {
    out->push_back(TokenOp(LayerOp::kNorm, "final.norm", tokens, hidden));
    if (classes > 0) out->push_back(Linear("head", 1, hidden, classes));
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// DeepLabv3+ on the aligned Xception encoder at output stride 16, as MLPerf
// HPC's DeepCAM builds it (mlcommons/hpc 2c627d45,
// deepcam/src/deepCam/architecture/deeplab_xception.py): separable
// convolutions (depthwise 3×3, then pointwise 1×1) with batch norm; the entry
// blocks downsample in their last depthwise convolution and a strided 1×1
// skip; `middle_blocks` identical 728-channel blocks; ASPP (a 1×1 branch,
// three dilated 3×3 branches and global pooling); a decoder of stride-2
// transposed convolutions joined by the low-level features at 1/4 size.
// Dilation changes neither FLOPs nor the implicit GEMM's shape.

struct SeparableOut {
  Ext e;
  int64_t c;
};

// A depthwise 3×3 (stride `stride`) and a pointwise 1×1 convolution, without
// biases; with `norm`, the batch norm (and ReLU) after it.
SeparableOut Separable(const std::string& p, Ext e, int64_t cin, int64_t cout, int stride, bool norm,
                       std::vector<NetLayer>* out) {
  NetLayer dw = Conv(p + ".depthwise", 2, e, cin, cin, 3, stride);
  dw.groups = static_cast<int>(cin);
  dw.bias = false;
  out->push_back(dw);
  e = dw.OutExtent();
  NetLayer pw = Conv(p + ".pointwise", 2, e, cin, cout, 1, 1);
  pw.bias = false;
  out->push_back(pw);
  if (norm) out->push_back(Spatial(LayerOp::kNorm, p + ".bn", 2, e, cout));
  return {e, cout};
}

// A 1×1 strided skip convolution with its batch norm, and the residual add.
void ProjectedSkip(const std::string& p, Ext in_e, int64_t cin, Ext out_e, int64_t cout, int stride,
                   std::vector<NetLayer>* out) {
  NetLayer skip = Conv(p + ".skip", 2, in_e, cin, cout, 1, stride);
  skip.bias = false;
  out->push_back(skip);
  out->push_back(Spatial(LayerOp::kNorm, p + ".skip_bn", 2, out_e, cout));
  out->push_back(Elementwise(p + ".add", 2, out_e, cout, 2));
}

Status BuildDeepLab(ObjectReader& r, std::vector<NetLayer>* out) {
  int64_t height = 768, width = 1152, channels = 16, classes = 3, middle = 16;
  PT_RETURN_IF_ERROR(PositiveInt(r, "height", &height, 65536));
  PT_RETURN_IF_ERROR(PositiveInt(r, "width", &width, 65536));
  PT_RETURN_IF_ERROR(PositiveInt(r, "channels", &channels, 4096));
  PT_RETURN_IF_ERROR(PositiveInt(r, "classes", &classes, 65536));
  PT_RETURN_IF_ERROR(PositiveInt(r, "middle_blocks", &middle, 256));
  if (height % 16 != 0 || width % 16 != 0) {
    return r.Error("height", "height and width must be multiples of 16 (the output stride)");
  }
  auto conv = [&](const std::string& name, Ext e, int64_t cin, int64_t cout, int k, int stride) {
    NetLayer l = Conv(name, 2, e, cin, cout, k, stride);
    l.bias = false;
    out->push_back(l);
    return l.OutExtent();
  };
  auto bn = [&](const std::string& name, Ext e, int64_t c) {
    out->push_back(Spatial(LayerOp::kNorm, name, 2, e, c));
  };
  // Entry flow.
  Ext e = conv("entry.conv1", Ext{height, width, 1}, channels, 32, 3, 2);
  out->front().input_grad = false;
  bn("entry.bn1", e, 32);
  conv("entry.conv2", e, 32, 64, 3, 1);
  bn("entry.bn2", e, 64);
  int64_t ch = 64;
  Ext low_e{};
  for (auto [name, planes] : {std::pair{"block1", int64_t{128}}, {"block2", int64_t{256}}, {"block3", int64_t{728}}}) {
    const std::string p = std::string("entry.") + name;
    const Ext in_e = e;
    Separable(p + ".sep1", e, ch, planes, 1, true, out);
    Separable(p + ".sep2", e, planes, planes, 1, true, out);
    e = Separable(p + ".sep_stride2", e, planes, planes, 2, false, out).e;
    ProjectedSkip(p, in_e, ch, e, planes, 2, out);
    ch = planes;
    if (std::string_view(name) == "block1") low_e = e;
  }
  // Middle flow: identical blocks, one layer list repeated.
  const size_t first = out->size();
  for (int i = 1; i <= 3; ++i) Separable("middle.sep" + std::to_string(i), e, 728, 728, 1, true, out);
  (*out)[first].checkpoint = true;
  out->push_back(Elementwise("middle.add", 2, e, 728, 2));
  for (size_t i = first; i < out->size(); ++i) (*out)[i].repeat = middle;
  // Exit flow: block20, then three separable convolutions (dilation 2).
  Separable("exit.block20.sep1", e, 728, 728, 1, true, out);
  Separable("exit.block20.sep2", e, 728, 1024, 1, true, out);
  Separable("exit.block20.sep_last", e, 1024, 1024, 1, false, out);
  ProjectedSkip("exit.block20", e, 728, e, 1024, 1, out);
  Separable("exit.conv3", e, 1024, 1536, 1, true, out);
  Separable("exit.conv4", e, 1536, 1536, 1, true, out);
  Separable("exit.conv5", e, 1536, 2048, 1, true, out);
  // ASPP: 1×1, three dilated 3×3 (rates 6, 12, 18), global pooling tiled back.
  conv("aspp.branch1", e, 2048, 256, 1, 1);
  bn("aspp.branch1_bn", e, 256);
  for (int i = 2; i <= 4; ++i) {
    conv("aspp.branch" + std::to_string(i), e, 2048, 256, 3, 1);
    bn("aspp.branch" + std::to_string(i) + "_bn", e, 256);
  }
  out->push_back(Spatial(LayerOp::kResample, "aspp.pool", 2, e, 2048));
  conv("aspp.pool_conv", Ext{1, 1, 1}, 2048, 256, 1, 1);
  bn("aspp.pool_affine", Ext{1, 1, 1}, 256);  // a per-channel scale and shift, no statistics
  out->push_back(Spatial(LayerOp::kResample, "aspp.pool_tile", 2, e, 256));
  out->push_back(Spatial(LayerOp::kResample, "aspp.concat", 2, e, 1280));
  conv("aspp.project", e, 1280, 256, 1, 1);
  bn("aspp.project_bn", e, 256);
  // Decoder: two stride-2 transposed convolutions to 1/4 size, the low-level
  // features' 48 channels joined, two 3×3 and a 1×1 convolution, two more
  // transposed convolutions to full size.
  conv("decoder.low_level", low_e, 128, 48, 1, 1);
  bn("decoder.low_level_bn", low_e, 48);
  auto deconv = [&](const std::string& name, Ext in, int64_t cin, int64_t cout, bool norm) {
    NetLayer t = Conv(name, 2, in, cin, cout, 3, 2);
    t.transposed = true;
    t.bias = false;
    out->push_back(t);
    if (norm) bn(name + "_bn", t.OutExtent(), cout);
    return t.OutExtent();
  };
  e = deconv("decoder.deconv1", e, 256, 256, true);
  e = deconv("decoder.deconv2", e, 256, 256, true);
  out->push_back(Spatial(LayerOp::kResample, "decoder.concat", 2, e, 304));
  conv("decoder.conv1", e, 304, 256, 3, 1);
  bn("decoder.conv1_bn", e, 256);
  conv("decoder.conv2", e, 256, 256, 3, 1);
  bn("decoder.conv2_bn", e, 256);
  out->push_back(Conv("decoder.conv3", 2, e, 256, 256, 1, 1));
  e = deconv("decoder.deconv3", e, 256, 256, true);
  deconv("decoder.deconv_last", e, 256, classes, false);
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// MLPerf's 3D U-Net (KiTS19; mlcommons/training image_segmentation unet3d.py):
// an input block of two 3×3×3 convolutions, down blocks (a stride-2
// convolution then one more) to each filter count and a bottleneck at the
// last, up blocks (a 2×2×2 transposed convolution, the skip concatenated, two
// convolutions), and a 1×1×1 output convolution. Instance norm + ReLU after
// every 3×3×3 convolution.

Status BuildUNet3d(ObjectReader& r, std::vector<NetLayer>* out) {
  int64_t patch = 128, in_ch = 1, classes = 3;
  std::vector<int64_t> filters{32, 64, 128, 256, 320};
  PT_RETURN_IF_ERROR(PositiveInt(r, "patch", &patch, 4096));
  PT_RETURN_IF_ERROR(PositiveInt(r, "in_channels", &in_ch, 4096));
  PT_RETURN_IF_ERROR(PositiveInt(r, "classes", &classes, 65536));
  PT_RETURN_IF_ERROR(PositiveList(r, "filters", &filters, true));
  if (patch % (int64_t{1} << filters.size()) != 0) {
    return r.Error("patch", "must be divisible by 2^(levels) (one halving per filter level and the bottleneck)");
  }
  Ext e = Cube(3, patch);
  auto conv_norm = [&](const std::string& name, int64_t cin, int64_t cout, int stride) {
    NetLayer c = Conv(name, 3, e, cin, cout, 3, stride);
    c.bias = false;
    out->push_back(c);
    e = c.OutExtent();
    out->push_back(Spatial(LayerOp::kNorm, name + ".norm", 3, e, cout));
  };
  conv_norm("input.conv1", in_ch, filters[0], 1);
  out->back().input_grad = true;
  out->at(out->size() - 2).input_grad = false;
  conv_norm("input.conv2", filters[0], filters[0], 1);
  std::vector<std::pair<Ext, int64_t>> skips{{e, filters[0]}};
  for (size_t i = 1; i <= filters.size(); ++i) {
    const int64_t cin = filters[i - 1], cout = filters[std::min(i, filters.size() - 1)];
    const std::string p = i < filters.size() ? "down" + std::to_string(i) : std::string("bottleneck");
    conv_norm(p + ".conv1", cin, cout, 2);
    conv_norm(p + ".conv2", cout, cout, 1);
    if (i < filters.size()) skips.push_back({e, cout});
  }
  int64_t ch = filters.back();
  for (size_t i = 0; i < filters.size(); ++i) {
    const auto [skip_e, skip_c] = skips[skips.size() - 1 - i];
    const std::string p = "up" + std::to_string(i + 1);
    NetLayer t = Conv(p + ".transpose", 3, e, ch, skip_c, 2, 2);
    t.transposed = true;
    out->push_back(t);
    e = t.OutExtent();
    out->push_back(Spatial(LayerOp::kResample, p + ".concat", 3, e, 2 * skip_c));
    conv_norm(p + ".conv1", 2 * skip_c, skip_c, 1);
    conv_norm(p + ".conv2", skip_c, skip_c, 1);
    ch = skip_c;
  }
  out->push_back(Conv("output.conv", 3, e, ch, classes, 1, 1));
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// A plain 3D CNN regressor (CosmoFlow; mlcommons/hpc cosmoflow model): conv
// layers of the listed filters each followed by an activation and a 2×2×2
// max pool, then dense layers.

Status BuildCnn3d(ObjectReader& r, std::vector<NetLayer>* out) {
  int64_t volume = 128, in_ch = 4, kernel = 3, outputs = 4;
  std::vector<int64_t> filters, dense;
  PT_RETURN_IF_ERROR(PositiveInt(r, "volume", &volume, 4096));
  PT_RETURN_IF_ERROR(PositiveInt(r, "in_channels", &in_ch, 4096));
  PT_RETURN_IF_ERROR(PositiveInt(r, "kernel", &kernel, 1024));
  PT_RETURN_IF_ERROR(PositiveInt(r, "outputs", &outputs, 1 << 20));
  PT_RETURN_IF_ERROR(PositiveList(r, "conv_filters", &filters, true));
  PT_RETURN_IF_ERROR(PositiveList(r, "dense", &dense, false));
  Ext e = Cube(3, volume);
  int64_t ch = in_ch;
  for (size_t i = 0; i < filters.size(); ++i) {
    const std::string p = "conv" + std::to_string(i + 1);
    out->push_back(Conv(p, 3, e, ch, filters[i], static_cast<int>(kernel), 1));
    if (i == 0) out->back().input_grad = false;
    out->push_back(Elementwise(p + ".act", 3, e, filters[i], 1));
    NetLayer pool = Spatial(LayerOp::kResample, p + ".pool", 3, e, filters[i]);
    pool.stride = 2;
    out->push_back(pool);
    e = pool.OutExtent();
    ch = filters[i];
  }
  int64_t width = ch * e[0] * e[1] * e[2];
  for (size_t i = 0; i < dense.size(); ++i) {
    out->push_back(Linear("dense" + std::to_string(i + 1), 1, width, dense[i]));
    width = dense[i];
  }
  out->push_back(Linear("output", 1, width, outputs));
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// A dense network of the listed widths (an autoencoder's encoder and decoder,
// LBANN's surrogate models): a linear layer and its activation per width.

Status BuildMlp(ObjectReader& r, std::vector<NetLayer>* out) {
  std::vector<int64_t> widths;
  PT_RETURN_IF_ERROR(PositiveList(r, "widths", &widths, true));
  if (widths.size() < 2) return r.Error("widths", "needs the input width and at least one layer");
  for (size_t i = 1; i < widths.size(); ++i) {
    out->push_back(Linear("dense" + std::to_string(i), 1, widths[i - 1], widths[i]));
    if (i == 1) out->back().input_grad = false;
    if (i + 1 < widths.size()) out->push_back(TokenOp(LayerOp::kElementwise, "act" + std::to_string(i), 1, widths[i]));
  }
  return Status::Ok();
}

// A convolutional GAN as DCGAN (Radford et al. 2016) and CosmoGAN (Mustafa
// et al. 2019) build it, and one training step of it as their loops run it:
// the generator from the latent vector (a dense projection or a transposed
// convolution from 1×1) up through stride-2 transposed convolutions of
// g_filters, batch norm + ReLU between, tanh at the image; the discriminator
// down through stride-2 convolutions of d_filters (batch norm + leaky ReLU,
// none on the first) to one logit. A step trains the discriminator on a real
// and a generated batch, then the generator through the discriminator: the
// generator runs forward and backward once, the discriminator three times
// (its weights counted once).

Status BuildGan(ObjectReader& r, std::vector<NetLayer>* out) {
  int64_t image = 64, channels = 3, latent = 100, kernel = 4;
  std::vector<int64_t> gf{512, 256, 128, 64}, df{64, 128, 256, 512};
  bool dense_projection = false;
  PT_RETURN_IF_ERROR(PositiveInt(r, "image", &image, 65536));
  PT_RETURN_IF_ERROR(PositiveInt(r, "channels", &channels, 4096));
  PT_RETURN_IF_ERROR(PositiveInt(r, "latent", &latent, 1 << 20));
  PT_RETURN_IF_ERROR(PositiveInt(r, "kernel", &kernel, 15));
  PT_RETURN_IF_ERROR(PositiveList(r, "g_filters", &gf, true));
  PT_RETURN_IF_ERROR(PositiveList(r, "d_filters", &df, true));
  PT_RETURN_IF_ERROR(r.OptBool("dense_projection", &dense_projection));
  const int64_t ups = static_cast<int64_t>(gf.size()), downs = static_cast<int64_t>(df.size());
  if (image % (int64_t{1} << ups) != 0 || image % (int64_t{1} << downs) != 0) {
    return r.Error("image", "must be divisible by 2^(number of filter levels) for both networks");
  }
  // Generator.
  const int64_t start = image >> ups;
  Ext e = Cube(2, start);
  if (dense_projection) {
    out->push_back(Linear("g.project", 1, latent, gf[0] * start * start));
  } else {
    NetLayer p = Conv("g.project", 2, Cube(2, 1), latent, gf[0], static_cast<int>(start), static_cast<int>(start));
    p.transposed = true;
    p.bias = false;
    out->push_back(p);
  }
  out->front().input_grad = false;
  out->push_back(Spatial(LayerOp::kNorm, "g.project.bn", 2, e, gf[0]));
  for (int64_t i = 0; i < ups; ++i) {
    const int64_t cout = i + 1 < ups ? gf[i + 1] : channels;
    NetLayer t = Conv("g.up" + std::to_string(i + 1), 2, e, gf[i], cout, static_cast<int>(kernel), 2);
    t.transposed = true;
    t.bias = i + 1 == ups;
    out->push_back(t);
    e = t.OutExtent();
    out->push_back(i + 1 < ups ? Spatial(LayerOp::kNorm, t.name + ".bn", 2, e, cout)
                               : Elementwise(t.name + ".tanh", 2, e, cout, 1));
  }
  // Discriminator, three times per step: on the real batch, on the generated
  // batch, and in the generator's update (weights counted once).
  for (int pass = 0; pass < 3; ++pass) {
    const std::string d = pass == 0 ? "d" : pass == 1 ? "d.fake" : "d.for_g";
    Ext x = Cube(2, image);
    int64_t cin = channels;
    for (int64_t i = 0; i < downs; ++i) {
      NetLayer c = Conv(d + ".down" + std::to_string(i + 1), 2, x, cin, df[i], static_cast<int>(kernel), 2);
      c.bias = i == 0;
      c.weights_shared = pass > 0;
      // Only the generator's update needs the gradient of the image.
      if (i == 0) c.input_grad = pass == 2;
      out->push_back(c);
      x = c.OutExtent();
      NetLayer act = i == 0 ? Elementwise(c.name + ".lrelu", 2, x, df[i], 1)
                            : Spatial(LayerOp::kNorm, c.name + ".bn", 2, x, df[i]);
      act.weights_shared = pass > 0;
      out->push_back(act);
      cin = df[i];
    }
    NetLayer logit = Linear(d + ".logit", 1, cin * x[0] * x[1], 1);
    logit.weights_shared = pass > 0;
    out->push_back(logit);
  }
  return Status::Ok();
}

using Builder = Status (*)(ObjectReader&, std::vector<NetLayer>*);
constexpr std::pair<const char*, Builder> kFamilies[] = {
    {"resnet", BuildResNet}, {"retinanet", BuildRetinaNet}, {"unet2d", BuildUNet2d},
    {"dit", BuildDiT},       {"vit", BuildViT},             {"unet3d", BuildUNet3d},
    {"cnn3d", BuildCnn3d},   {"mlp", BuildMlp},             {"gan", BuildGan},
    {"video_dit", BuildVideoDiT}, {"deeplab", BuildDeepLab}};

}  // namespace

std::vector<std::string> FamilyNames() {
  std::vector<std::string> out;
  for (const auto& [name, build] : kFamilies) out.push_back(name);
  return out;
}

Status BuildFamily(const std::string& family, ObjectReader& architecture, std::vector<NetLayer>* out) {
  for (const auto& [name, build] : kFamilies) {
    if (family == name) return build(architecture, out);
  }
  return Status::NotFound("'" + family + "' is not a network family (" + topology::JoinNames(FamilyNames()) + ")");
}

}  // namespace paratune::planner::network_detail
