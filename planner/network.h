// planner/network.h: networks that are not one stack of transformer blocks
// (U-Nets, diffusion transformers, CNNs, 3D CNNs), as a list of layers with
// their per-sample tensor shapes, so their FLOPs, parameters, saved
// activations and kernels can be priced (network_cost.h).
//
// A network is read from JSON in one of two forms (docs/networks.md):
//   {"name", "source", "layers": [...]}  every layer spelled out (a user's own
//                                         network);
//   {"name", "source", "family", "architecture": {...}}  a family builder
//                                         (resnet, retinanet, unet2d, dit, vit,
//                                         video_dit, unet3d, cnn3d, mlp, gan)
//                                         expands the handful of numbers its
//                                         paper or reference code states.
// Presets (planner/presets/networks/*.json) use the second form, every number
// with its source.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace paratune::planner {

enum class LayerOp : uint8_t {
  kConv,         // 1D/2D/3D convolution (implicit GEMM); transposed when `transposed`
  kLinear,       // a dense layer over `tokens` rows
  kAttention,    // fused (flash) attention: tokens × kv_tokens scores per head
  kNorm,         // a normalisation with its activation fused (BN+ReLU, GN+SiLU, LN)
  kElementwise,  // residual adds, gates, activations not fused into a norm
  kResample,     // pooling, nearest upsampling, concatenation copies
};
const char* LayerOpName(LayerOp op);

// How a layer splits under tensor parallelism (Megatron's pairs: a
// column-parallel layer splits its outputs, the row-parallel layer after it
// its inputs and all-reduces its output; what lies between works on the
// split width).
enum class TensorSplit : uint8_t {
  kNone,     // replicated on every GPU of the tensor group
  kColumn,   // output features split; the backward all-reduces its input's gradient
  kRow,      // input features split; the forward all-reduces its output
  kSharded,  // works on the split width: attention heads, element-wise work between the pair
};
const char* TensorSplitName(TensorSplit s);  // "none" | "column" | "row" | "sharded"

// One layer, per sample. Spatial tensors are [channels, d1, (d2, (d3))].
struct NetLayer {
  LayerOp op = LayerOp::kConv;
  std::string name;                       // "stage2.block1.conv2"
  int dims = 0;                           // spatial dimensions of the input (0 for token rows)
  std::array<int64_t, 3> extent{1, 1, 1};  // input spatial extent, unused dimensions 1
  int64_t in_channels = 0;                // conv/linear input width; norm/elementwise/resample width
  int64_t out_channels = 0;               // conv/linear output width
  int kernel = 1;                         // conv: kernel side (cubic/square)
  int stride = 1;                         // conv/resample: output = ceil(extent / stride)
  int upsample = 1;                       // resample/transposed conv: output = extent × upsample
  int groups = 1;                         // grouped conv (ResNeXt)
  bool transposed = false;                // conv: a transposed (up-)convolution
  bool bias = true;                       // conv/linear: a bias vector; norm: its scale and shift
  int64_t tokens = 0;                     // linear: rows per sample; attention: query tokens
  int64_t kv_tokens = 0;                  // attention: key/value tokens
  int64_t heads = 0, head_dim = 0;        // attention
  double tensors = 1;                     // elementwise: input tensors per output element
  bool input_grad = true;                 // false: nothing before it needs its input's gradient
  bool frozen = false;                    // runs forward only: no gradients, no saved activations
  bool weights_shared = false;            // its weights are counted at another layer (shared heads)
  // A repeated block's input (a transformer block's first norm): with
  // activation recomputation only this layer's input is kept per repeat,
  // and the block is recomputed in the backward (RecomputedLayers).
  bool checkpoint = false;
  int64_t repeat = 1;                     // the layer occurs this many times, identical
  TensorSplit tensor = TensorSplit::kNone;  // its part under tensor parallelism

  // Elements of the input and output tensors per sample.
  double InElems() const;
  double OutElems() const;
  // Output spatial extent (conv/resample).
  std::array<int64_t, 3> OutExtent() const;
  double Params() const;        // trainable parameters (one occurrence)
  double ForwardFlops() const;  // multiply-add = 2 FLOPs (one occurrence)
};

struct Network {
  std::string name;
  std::string family;  // a builder of network_families.h, or "layers" (explicit)
  std::string sample;  // what one sample is: "224x224x3 image"
  std::string source;
  // Published parameter count and per-sample training FLOPs, when the source
  // states them (0 = none): the builders are tested against them.
  double published_params = 0;
  double published_train_flops = 0;
  std::vector<NetLayer> layers;
  // The family form it was built from ({name, source, family, architecture,
  // ...}); null for an explicit layer list. ResizeNetwork rebuilds from it.
  Json spec;

  double Params() const;
  // Forward FLOPs per sample; training counts about 3× (dgrad and wgrad per
  // GEMM, attention's backward twice its forward; no dgrad for a layer whose
  // input needs no gradient).
  double ForwardFlops() const;
  double TrainingFlops() const;
};

// Which layers activation recomputation wraps: every maximal run of
// consecutive layers with repeat > 1 (a stack of identical blocks, as
// torchtitan's apply_ac and torch.utils.checkpoint wrap them) that holds a
// `checkpoint` layer. Empty when none does: the network has nothing to
// recompute.
std::vector<bool> RecomputedLayers(const Network& net);

// The layer one GPU of a tensor group of `t` runs: a column layer's outputs,
// a row layer's inputs, a sharded layer's width (attention: heads) over t.
// REQUIRES: t divides them (CheckTensorSplit).
NetLayer TensorShard(const NetLayer& l, int t);
// Whether `t`-way tensor parallelism splits `net` evenly: it has a column
// layer, and t divides every split width. InvalidArgument names the layer.
Status CheckTensorSplit(const Network& net, int t);

// Whether a layer is self-attention (its keys are its own tokens), which
// sequence parallelism runs head-split between two all-to-alls.
bool IsSelfAttention(const NetLayer& l);
// The part of a layer (already its tensor shard) one GPU of a sequence group
// of `s` runs, as DeepSpeed-Ulysses splits a transformer: token rows over s
// (linears over more than one token, token norms and element-wise work);
// self-attention over every token for heads / s, after an all-to-all of Q,
// K, V and before one of its output; cross-attention its query tokens over s
// against every key. Spatial layers (convolutions: a ViT's patch embedding)
// run whole on every GPU. REQUIRES: CheckSequenceSplit(net, s, t).
NetLayer SequenceShard(const NetLayer& l, int s);
// Whether `s`-way sequence parallelism applies to `net` under tensor
// parallelism `t`: the network is a transformer (self-attention, and no
// convolution but an input embedding: U-Nets and CNNs split spatially), and
// s divides every self-attention layer's heads per tensor rank.
// InvalidArgument names the layer or the rule.
Status CheckSequenceSplit(const Network& net, int s, int t);

// The explicit form (every layer spelled out), which ParseNetwork reads back
// to the same network: what `presets show` prints for a user to edit.
Json NetworkToJson(const Network& n);
// The input size of a family-built network, as its builder reads it: the
// architecture key ("image", "latent", "image_tokens", "frames", "patch",
// "volume"), its value, and the step sizes must keep (so every halving
// divides: ResNet 32, RetinaNet 128, the SD U-Net 2^(levels − 1), the 3D
// U-Net 2^levels, CosmoFlow 2^convs, ViT its patch, a video DiT its patch_t).
// Unresizable (explicit layers): key "".
struct NetworkSize {
  std::string key;
  int64_t value = 0;
  int64_t step = 1;
};
NetworkSize SizeOf(const Network& n);
// The same network at input size `value` (a multiple of SizeOf(n).step).
Result<Network> ResizeNetwork(const Network& n, int64_t value);

// Parses either JSON form. Strict: unknown keys are errors naming their pointer.
Result<Network> ParseNetwork(const Json& j, const std::string& pointer);
// Presets: planner/presets/networks/*.json (`paratune presets networks`).
std::vector<std::string> NetworkPresetNames();
Result<Network> NetworkPreset(const std::string& name);
// A preset name or an object.
Result<Network> ResolveNetwork(const Json& j, const std::string& pointer);

}  // namespace paratune::planner
