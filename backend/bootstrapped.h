// backend/bootstrapped.h: what the process backends (mpi-cpu, cuda) share: one
// process a rank, joined by a Bootstrap, which answers for the rank, the world
// size, the host layout and the host collectives.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/bootstrap.h"
#include "backend/collectives.h"

namespace paratune::backend {

class BootstrappedBackend : public CollectiveBackend {
 public:
  int rank() const override { return boot_->rank(); }
  int world_size() const override { return boot_->size(); }
  int local_rank() const override { return layout_.local_rank; }
  int local_size() const override { return layout_.local_size; }
  const std::vector<std::string>& hosts() const override { return layout_.hosts; }

  Status HostBarrier() override { return boot_->Barrier(); }
  Status HostAllReduceMax(std::vector<double>* values) override {
    return boot_->AllReduceMax(values->data(), static_cast<int>(values->size()));
  }
  Result<std::vector<std::string>> HostAllGather(const std::string& mine) override {
    return AllGatherStrings(*boot_, mine);
  }

 protected:
  BootstrappedBackend(std::unique_ptr<Bootstrap> boot, HostLayout layout)
      : boot_(std::move(boot)), layout_(std::move(layout)) {}

  // Constructed first and destroyed last: a derived backend's destructor
  // still has its bootstrap.
  std::unique_ptr<Bootstrap> boot_;
  HostLayout layout_;
};

}  // namespace paratune::backend
