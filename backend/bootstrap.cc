#include "backend/bootstrap.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace paratune::backend {
namespace {

class SingleProcessBootstrap final : public Bootstrap {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string kind() const override { return "single"; }
  std::map<std::string, std::string> Versions() const override { return {}; }
  Status Barrier() override { return Status::Ok(); }
  Status Broadcast(void*, int64_t, int root) override {
    if (root != 0)
      return Status::InvalidArgument("broadcast root " + std::to_string(root) +
                                     " outside a single-process group");
    return Status::Ok();
  }
  Status AllGather(const void* mine, int64_t bytes, void* all) override {
    if (bytes > 0) std::memcpy(all, mine, static_cast<size_t>(bytes));
    return Status::Ok();
  }
  Status AllReduceMax(double*, int) override { return Status::Ok(); }
  void Abort(int) override {}
};

}  // namespace

std::unique_ptr<Bootstrap> CreateSingleProcessBootstrap() {
  return std::make_unique<SingleProcessBootstrap>();
}

Result<std::vector<std::string>> AllGatherStrings(Bootstrap& boot, const std::string& mine) {
  const int n = boot.size();
  // Lengths first, then one fixed-width exchange padded to the longest string.
  std::vector<double> len(1, static_cast<double>(mine.size()));
  PT_RETURN_IF_ERROR(boot.AllReduceMax(len.data(), 1));
  const auto width = static_cast<int64_t>(len[0]) + 8;
  std::vector<char> slot(static_cast<size_t>(width), 0);
  const uint64_t my_len = mine.size();
  std::memcpy(slot.data(), &my_len, sizeof my_len);
  std::memcpy(slot.data() + 8, mine.data(), mine.size());
  std::vector<char> all(static_cast<size_t>(width) * static_cast<size_t>(n), 0);
  PT_RETURN_IF_ERROR(boot.AllGather(slot.data(), width, all.data()));
  std::vector<std::string> out(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const char* p = all.data() + static_cast<size_t>(r) * static_cast<size_t>(width);
    uint64_t l = 0;
    std::memcpy(&l, p, sizeof l);
    if (l > static_cast<uint64_t>(width - 8)) {
      return Status::Internal("string gather: rank " + std::to_string(r) + " sent a bad length");
    }
    out[static_cast<size_t>(r)].assign(p + 8, static_cast<size_t>(l));
  }
  return out;
}

std::string LocalHostName() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == 0) return "localhost";
  return buf;
}

Result<HostLayout> DiscoverHostLayout(Bootstrap& boot) {
  HostLayout layout;
  PT_ASSIGN_OR_RETURN(layout.hosts, AllGatherStrings(boot, LocalHostName()));
  const std::string& me = layout.hosts[static_cast<size_t>(boot.rank())];
  layout.local_rank = 0;
  layout.local_size = 0;
  for (int r = 0; r < boot.size(); ++r) {
    if (layout.hosts[static_cast<size_t>(r)] != me) continue;
    if (r < boot.rank()) ++layout.local_rank;
    ++layout.local_size;
  }
  return layout;
}

bool LaunchedUnderMpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_PROCID",
                        "MPI_LOCALNRANKS", "MV2_COMM_WORLD_SIZE"}) {
    if (std::getenv(v)) return true;
  }
  return false;
}

Status CheckOneDevicePerRank(const HostLayout& layout, int rank, int devices, int requested_device) {
  if (requested_device >= 0) {
    if (requested_device >= devices) {
      return Status::InvalidArgument("device " + std::to_string(requested_device) + " requested, " +
                                     std::to_string(devices) + " visible");
    }
    return Status::Ok();
  }
  if (layout.local_size > devices) {
    const std::string host = rank >= 0 && static_cast<size_t>(rank) < layout.hosts.size()
                                 ? layout.hosts[static_cast<size_t>(rank)]
                                 : LocalHostName();
    return Status::InvalidArgument("host " + host + " runs " + std::to_string(layout.local_size) +
                                   " ranks but has " + std::to_string(devices) +
                                   " GPUs: NCCL needs one GPU per rank (launch with "
                                   "--ntasks-per-node=" +
                                   std::to_string(devices) + ")");
  }
  return Status::Ok();
}

}  // namespace paratune::backend
