// The GPU tier for a network's plans: compiled wherever the cuda backend is,
// skipped without a device. On one GPU it confirms the top plans of the SD 2
// U-Net, ResNet-50 and the 3D U-Net on 8 GPUs of the device's cluster preset
// (every layer shape on the device: convolutions through the lowered
// convolution, attention and linears through cuBLAS; the gradient sync the
// model's, one process) and prints measured against predicted per shape.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "executor/run/network_confirm.h"
#include "planner/network_request.h"
#include "tests/executor/test_util.h"

namespace paratune::executor {
namespace {

class NetworkConfirmGpu : public testing::OneGpuTest {};

TEST_F(NetworkConfirmGpu, TopPlansOfThreeNetworksOnOneGpu) {
  for (const auto& [network, batch] : {std::pair<const char*, int>{"sd2-unet", 64}, {"resnet-50", 1024},
                                       {"unet3d-kits19", 16}}) {
    auto job = planner::ParseNetworkJob(
        Json{{"network", network}, {"cluster", cluster_.name}, {"gpus", 8}, {"global_batch", batch}});
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    auto in = NetworkConfirmInputFromPlans(Json::parse(planner::PlanNetworkDocument(*job).dump()), 2);
    ASSERT_TRUE(in.ok()) << in.status().ToString();
    NetworkConfirmOptions o;
    o.layers = 1000;
    auto r = ConfirmNetworkCandidates(*backend_, *in, o, nullptr);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    for (const OrderedJson& c : (*r)["candidates"]) {
      ASSERT_EQ(c["status"], "ok") << c.dump(2);
      const double measured = c["measured_step_s"].get<double>();
      ASSERT_TRUE(std::isfinite(measured) && measured > 0);
      std::printf("%s %s on %s: predicted %.4f s, measured %.4f s (%+.1f %%)\n", network,
                  c["layout"].dump().c_str(), device_.name.c_str(), c["predicted"]["step_s"].get<double>(), measured,
                  100 * c["error"].get<double>());
      for (const OrderedJson& row : c["compute"]["by_layer"]) {
        std::printf("    %-40s %-9s x%-4.0f fwd %.3f / %.3f ms  bwd %.3f / %.3f ms (measured / predicted)\n",
                    row["layer"].get<std::string>().c_str(), row["op"].get<std::string>().c_str(),
                    row["occurrences"].get<double>(), 1e3 * row["measured_forward_s"].get<double>(),
                    1e3 * row["predicted_forward_s"].get<double>(), 1e3 * row["measured_backward_s"].get<double>(),
                    1e3 * row["predicted_backward_s"].get<double>());
      }
    }
  }
}

}  // namespace
}  // namespace paratune::executor
