// Planner speed: evaluations per second for the full cost of one candidate,
// and the exhaustive search of the reference job.
//   build/bench/planner_bench --benchmark_min_time=1
// Figures: items_per_second = candidates per second on one core.
#include <benchmark/benchmark.h>

#include <atomic>
#include <thread>
#include <vector>

#include "planner/network_cost.h"
#include "planner/search.h"

namespace paratune::planner {
namespace {

struct Reference {  // GPT-3 175B on 1024 A100s, seq 2048, batch 1536
  ModelSpec model = *ModelPreset("gpt3-175b");
  TrainingSpec training = [] {
    TrainingSpec t;
    t.seq_len = 2048;
    t.global_batch = 1536;
    return t;
  }();
  topology::ClusterSpec cluster = *topology::ClusterPreset("dgx-a100-80gb");
  CostModel cm{model, training, cluster, 1024};
  // A typical candidate of that job (Megatron 3D with the distributed
  // optimizer and the usual overlaps) and its compute terms.
  ParallelConfig config = [] {
    ParallelConfig c;
    c.gy = 8;
    c.pp = 8;
    c.vpp = 3;
    c.gdata = 16;
    c.sp = true;
    c.recompute = Recompute::kSelective;
    c.distributed_optimizer = true;
    c.oar = c.overlap_grad_reduce = c.overlap_param_gather = true;
    return c;
  }();
  CostModel::ComputeTerms terms = cm.Compute(config);
};

// The full cost of one candidate from scratch: compute terms, memory, time.
void BM_PredictFullCost(benchmark::State& state) {
  Reference ref;
  ParallelConfig c = ref.config;
  for (auto _ : state) {
    Prediction p = ref.cm.Predict(c);
    benchmark::DoNotOptimize(p);
    c.mbs = c.mbs == 1 ? 2 : 1;  // defeat caching of identical inputs
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PredictFullCost);

// The search's inner step: the full cost with compute terms shared by the
// candidates that differ only in ZeRO, recompute, vpp and placement.
void BM_PredictWithSharedTerms(benchmark::State& state) {
  Reference ref;
  ParallelConfig c = ref.config;
  int i = 0;
  for (auto _ : state) {
    c.recompute = static_cast<Recompute>(i % 3);
    c.vpp = 1 + (i % 2) * 2;
    ++i;
    Prediction p = ref.cm.PredictWith(c, ref.terms);
    benchmark::DoNotOptimize(p);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PredictWithSharedTerms);

void BM_Memory(benchmark::State& state) {
  Reference ref;
  for (auto _ : state) {
    MemoryBreakdown m = ref.cm.MemoryWith(ref.config, ref.terms);
    benchmark::DoNotOptimize(m);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Memory);

// Times the search of `models` (a cost model, or one per framework), its
// shards shared out over state.range(0) threads, each taking the next
// unclaimed shard. items_per_second = configurations evaluated per second.
template <class Models>
void RunSearch(benchmark::State& state, const Models& models) {
  const int threads = static_cast<int>(state.range(0));
  int64_t evaluated = 0;
  for (auto _ : state) {
    Search search(models, SearchOptions{});
    std::vector<SearchResult> parts(search.num_shards());
    std::atomic<int> next{0};
    auto work = [&] {
      for (int i = next++; i < search.num_shards(); i = next++) parts[i] = search.RunShard(i);
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
    SearchResult r = search.Merge(std::move(parts));
    evaluated += r.evaluated;
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(evaluated);
}

// The whole exhaustive search (space "all") of the reference job.
void BM_SearchGpt3_175b_1024(benchmark::State& state) {
  Reference ref;
  RunSearch(state, ref.cm);
}
BENCHMARK(BM_SearchGpt3_175b_1024)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// DeepSeek-V3 searched over every framework of space "all" (as `paratune
// plan` runs it), ep/etp/dispatcher enumerated, on 2048 GPUs of `cluster`.
void SearchDeepSeekV3(benchmark::State& state, const char* cluster_name, TrainingSpec training) {
  const ModelSpec model = *ModelPreset("deepseek-v3");
  const topology::ClusterSpec cluster = *topology::ClusterPreset(cluster_name);
  if (training.precision == topology::Precision::kFp8) training.recipe = cluster.gpu.fp8_default_recipe;
  std::vector<CostModel> models;
  for (Framework f : FrameworksOf(Family::kAll)) {
    TrainingSpec t = training;
    t.framework = f;
    models.emplace_back(model, t, cluster, 2048);
  }
  std::vector<const CostModel*> ptrs;
  for (const CostModel& cm : models) ptrs.push_back(&cm);
  RunSearch(state, ptrs);
}

// The mixture-of-experts reference job: 2048 H100s (dgx-h100), seq 4096,
// batch 8192, bf16.
void BM_SearchDeepSeekV3_2048(benchmark::State& state) {
  TrainingSpec training;
  training.seq_len = 4096;
  training.global_batch = 8192;
  SearchDeepSeekV3(state, "dgx-h100", training);
}
BENCHMARK(BM_SearchDeepSeekV3_2048)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// The job of `paratune plan --model deepseek-v3 --cluster hgx-h800 --gpus
// 2048 --global-batch 15360 --seq 4096 --precision fp8`: 29.6 M configurations.
void BM_SearchDeepSeekV3_H800_15360_Fp8(benchmark::State& state) {
  TrainingSpec training;
  training.seq_len = 4096;
  training.global_batch = 15360;
  training.precision = topology::Precision::kFp8;
  SearchDeepSeekV3(state, "hgx-h800", training);
}
BENCHMARK(BM_SearchDeepSeekV3_H800_15360_Fp8)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// A network's step (network_cost.h) and its layout search: Stable
// Diffusion's U-Net (492 layers) on 64 H100, and FLUX on 1,152 GB200 with
// tensor groups inside the rack.
void BM_PredictNetworkSd2Unet(benchmark::State& state) {
  const Network net = *NetworkPreset("sd2-unet");
  const topology::ClusterSpec cluster = *topology::ClusterPreset("dgx-h100");
  const NetworkLayout layout{64, 1, 32, 2048, WeightSharding::kOptimizer, 1};
  for (auto _ : state) benchmark::DoNotOptimize(PredictNetwork(net, cluster, layout, NetworkTraining{}));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PredictNetworkSd2Unet);

void BM_SearchNetwork(benchmark::State& state) {
  const bool flux = state.range(0) == 1;
  const Network net = *NetworkPreset(flux ? "flux1-schnell" : "sd2-unet");
  const topology::ClusterSpec cluster = *topology::ClusterPreset(flux ? "gb200-nvl72" : "dgx-h100");
  const int gpus = flux ? 1152 : 64;
  const int64_t batch = flux ? 2304 : 2048;
  for (auto _ : state) {
    benchmark::DoNotOptimize(SearchNetworkLayouts(net, cluster, gpus, batch, NetworkTraining{}, 0.05));
  }
}
BENCHMARK(BM_SearchNetwork)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace paratune::planner

BENCHMARK_MAIN();
