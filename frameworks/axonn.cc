// frameworks/axonn.cc: AxoNN's start-up rules and its setup code.
#include <algorithm>
#include <numeric>
#include <sstream>

#include "frameworks/emit_internal.h"
#include "planner/cost_model.h"
#include "planner/model.h"

namespace paratune::planner::emit_internal {
namespace {

// ---------------------------------------------------------------------- AxoNN
//
// Rules from axonn-ai/axonn @ 660a224: G_inter·G_data·G_intra_r·G_intra_c·
// G_intra_d == world (communication.py); global batch % (G_data·micro) == 0
// (axonn.py create_dataloader); auto_parallelize keeps a linear sequential
// unless out % G_r == 0, in % G_c == 0 and (in·out/(G_r·G_c)) % G_d == 0
// (intra_layer/automatic_parallelism.py), which would silently undo the plan,
// so every transformer linear must pass. Rank order: c, r, d, inter, data.

Status Check(const Plan& p) {
  const ParallelConfig& c = p.c;
  const ModelSpec& m = p.job.model;
  const EmitFormat f = EmitFormat::kAxonn;
  if (c.cp > 1)
    return Refuse(f, "AxoNN has no context/sequence parallelism (cp = " + Str(c.cp) + ")");
  if (c.sp) return Refuse(f, "Megatron sequence parallelism (sp) is not an AxoNN option");
  if (c.pp > 1 || c.vpp > 1) {
    return Refuse(f,
                  "paratune models AxoNN's tensor + data parallelism (G_inter = 1); this plan "
                  "pipelines over pp = " +
                      Str(c.pp) + " stages");
  }
  if (c.zero > 0 || c.distributed_optimizer || c.qwz || c.hpz || c.qgz) {
    return Refuse(f,
                  "AxoNN shards weights and optimizer state over its depth group G_intra_d (gz), "
                  "not with ZeRO over G_data; this plan uses ZeRO stage " +
                      Str(std::max(c.zero, c.distributed_optimizer ? 1 : 0)));
  }
  if (c.world() != p.job.gpus) {
    return Refuse(f, "G_inter·G_data·G_intra_r·G_intra_c·G_intra_d = " + Str(c.world()) +
                         " is not the world size " + Str(p.job.gpus));
  }
  if (p.Gbs() % (int64_t{c.mbs} * c.gz * c.gdata) != 0) {
    return Refuse(f, "global batch " + Str(p.Gbs()) +
                         " is not divisible by micro-batch × G_data × "
                         "G_intra_d = " +
                         Str(int64_t{c.mbs} * c.gz * c.gdata));
  }
  const int64_t h = m.hidden, f_ = m.ffn_hidden, kv = int64_t{m.kv_heads} * m.head_dim();
  const std::pair<int64_t, int64_t> linears[] = {
      {h, m.qkv_out()}, {h, h}, {h, kv}, {h, f_}, {f_, h}};
  for (const auto& [in, out] : linears) {
    if (out % c.gy != 0 || in % c.gx != 0 || (in * out / (int64_t{c.gy} * c.gx)) % c.gz != 0) {
      return Refuse(f, "auto_parallelize would keep the " + Str(in) + "→" + Str(out) +
                           " linear sequential (needs out % G_intra_r(" + Str(c.gy) +
                           ") == 0, in % "
                           "G_intra_c(" +
                           Str(c.gx) +
                           ") == 0 and in·out/(G_intra_r·G_intra_c) % "
                           "G_intra_d(" +
                           Str(c.gz) + ") == 0)");
    }
  }
  if (p.job.training.precision == topology::Precision::kFp8) {
    return Refuse(f, "AxoNN's tensor-parallel layers run torch matmuls, with no FP8 path");
  }
  if (!OrderMatches(c, {Dim::kX, Dim::kY, Dim::kZ, Dim::kPp, Dim::kData})) {
    return Refuse(f,
                  "rank order " + OrderString(c) +
                      " is not AxoNN's fixed layout x (G_intra_c), y (G_intra_r), z (G_intra_d), "
                      "inter, data");
  }
  return Status::Ok();
}

const char* PyBool(bool b) { return b ? "True" : "False"; }

// The output layer (h -> vocab) is priced split over the tensor grid, which
// auto_parallelize does only when vocab % G_intra_r, h % G_intra_c and
// (h·vocab/(G_intra_r·G_intra_c)) % G_intra_d are all 0. With h % G_intra_c
// already required of the transformer linears, that holds for a vocabulary
// that is a multiple of G_intra_r·G_intra_d / gcd(G_intra_d, h/G_intra_c).
int64_t OutputLayerVocabMultiple(const ModelSpec& m, const ParallelConfig& c) {
  const int64_t per_column = m.hidden / c.gx;
  return int64_t{c.gy} * c.gz / std::gcd(int64_t{c.gz}, per_column);
}

std::string Write(const Plan& p) {
  const ParallelConfig& c = p.c;
  const ModelSpec& m = p.job.model;
  std::ostringstream os;
  os << Header(p, AxonnEmitter(), "#", "AxoNN setup");
  os << "# Start one process per GPU (srun / mpirun) with CUDA_DEVICE_MAX_CONNECTIONS=1.\n";
  os << "# build_model(), dataset and optimizer are yours.\n";
  os << "from axonn import axonn as ax\n";
  os << "from axonn.intra_layer import auto_parallelize, optimize_communication, "
        "sync_gradients\n\n";
  os << "ax.init(\n";
  os << "    G_inter=1,\n";
  os << "    G_data=" << c.gdata << ",\n";
  os << "    G_intra_r=" << c.gy << ",  # Y: splits output features; backward all-reduce\n";
  os << "    G_intra_c=" << c.gx
     << ",  # X: splits input features; forward all-reduce; innermost ranks\n";
  os << "    G_intra_d=" << c.gz << ",  # Z: shards each weight block and the batch (FSDP-like)\n";
  os << ")\n\n";
  os << "GLOBAL_BATCH_SIZE = " << p.Gbs() << "  # sequences per iteration\n";
  os << "MICRO_BATCH_SIZE = " << c.mbs << "  # sequences per GPU per micro-batch\n";
  os << "GRADIENT_ACCUMULATION_STEPS = " << p.MicroBatches()
     << "  # GLOBAL_BATCH_SIZE / (MICRO_BATCH_SIZE * G_data * G_intra_d)\n";
  os << "SEQ_LEN = " << p.job.training.seq_len << "\n";
  switch (p.job.training.precision) {
    case topology::Precision::kBf16:
      os << "PRECISION = \"bf16\"  # forward under torch.autocast(\"cuda\", "
            "dtype=torch.bfloat16)\n";
      break;
    case topology::Precision::kFp16:
      os << "PRECISION = \"fp16\"  # torch.autocast(\"cuda\", dtype=torch.float16) with a "
            "GradScaler\n";
      break;
    default:
      os << "PRECISION = \"" << topology::PrecisionName(p.job.training.precision) << "\"\n";
      break;
  }
  os << "ACTIVATION_CHECKPOINTING = \"" << RecomputeName(c.recompute) << "\"";
  if (c.recompute == Recompute::kFull)
    os << "  # torch.utils.checkpoint around each transformer block";
  if (c.recompute == Recompute::kSelective) os << "  # checkpoint the attention core only";
  os << "\n";
  if (const int64_t k = OutputLayerVocabMultiple(m, c); m.vocab % k != 0) {
    const int64_t padded = (m.vocab + k - 1) / k * k;
    os << "# Note: the plan prices the output layer (" << m.hidden << "->" << m.vocab
       << ") split over the tensor grid; auto_parallelize splits it only for a vocabulary that "
          "is a multiple of "
       << k
       << " (out % G_intra_r, in % G_intra_c and in*out/(G_intra_r*G_intra_c) % G_intra_d "
          "all 0): pad it to "
       << padded << ", or it stays sequential.\n";
  }
  if (c.gz > 1) {
    // The plan's time assumes the gathered Z weights of as many layers as fit
    // stay cached from the forward to the backward (framework preset
    // z_weight_cache; docs/frameworks.md).
    TrainingSpec t = p.job.training;
    t.framework = Framework::kAxonn;
    const CostModel cm(m, t, p.job.cluster, p.job.gpus);
    const int cached = cm.Memory(c).z_cached_layers;
    if (cached > 0) {
      os << "# The plan caches the gathered weights of " << cached << " of " << m.layers
         << " layers between forward and backward: in Megatron-AxoNN,\n"
         << "#   --num-layers-for-caching-weights-in-depth-tensor-parallel-all-gather " << cached
         << " --layer-caching-level 2\n";
    }
  }
  os << "\nwith auto_parallelize():\n";
  os << "    model = build_model()  # every divisible nn.Linear becomes an AxoNN tensor-parallel "
        "Linear\n\n";
  os << "loader = ax.create_dataloader(dataset, global_batch_size=GLOBAL_BATCH_SIZE,\n";
  os << "                              micro_batch_size=MICRO_BATCH_SIZE)\n\n";
  os << "def train_step(micro_batches):  # GRADIENT_ACCUMULATION_STEPS batches from loader\n";
  os << "    for batch in micro_batches:\n";
  os << "        with optimize_communication(\n";
  os << "            overlap_all_reduce=" << PyBool(c.oar) << ",\n";
  os << "            overlap_reduce_scatter=" << PyBool(c.ors) << ",\n";
  os << "            overlap_all_gather=" << PyBool(c.oag) << ",\n";
  os << "            model_object_for_overlapping_allgathers=" << (c.oag ? "model" : "None")
     << ",\n";
  os << "        ):\n";
  os << "            loss = model(batch).loss / GRADIENT_ACCUMULATION_STEPS\n";
  os << "            loss.backward()\n";
  os << "    sync_gradients(model)\n";
  os << "    optimizer.step()  # outside the optimize_communication context\n";
  os << "    optimizer.zero_grad()\n";
  return os.str();
}

std::vector<Keep> KeepOf(const Plan& p) {
  std::vector<Keep> k = {
      {"CUDA_DEVICE_MAX_CONNECTIONS", "1",
       "AxoNN's overlapped all-reduces rely on the kernels staying in issue order"}};
  KeepAllocator(p, "PYTORCH_CUDA_ALLOC_CONF", &k);
  return k;
}

std::string Launcher(const Plan& p) {
  const std::string gpn = Str(p.GpusPerNode());
  return "srun --nodes " + Str(p.Nodes()) + " --ntasks-per-node " + gpn + " --gpus-per-node " +
         gpn + " python train.py";
}

}  // namespace

// The AxoNN snapshot whose rules Check restates.
constexpr Follows kFollows{
    "axonn-ai/axonn", "660a224", "main of 2024-10-24",
    "axonn/communication.py, axonn/axonn.py, axonn/intra_layer/automatic_parallelism.py"};

const FrameworkEmitter& AxonnEmitter() {
  static const FrameworkEmitter e{EmitFormat::kAxonn, kFollows, Check, Write, KeepOf, Launcher};
  return e;
}

}  // namespace paratune::planner::emit_internal
