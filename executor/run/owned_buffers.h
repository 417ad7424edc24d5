// executor/run/owned_buffers.h: the device allocations of one measurement,
// freed on every path when it goes out of scope.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "common/status.h"

namespace paratune::executor {

class OwnedBuffers {
 public:
  explicit OwnedBuffers(backend::Backend& b) : b_(b) {}
  ~OwnedBuffers() {
    for (const backend::Buffer& x : owned_) (void)b_.Free(x);
  }
  OwnedBuffers(const OwnedBuffers&) = delete;
  OwnedBuffers& operator=(const OwnedBuffers&) = delete;
  // A new allocation of at least one byte.
  Result<backend::Buffer> Get(int64_t bytes) {
    PT_ASSIGN_OR_RETURN(backend::Buffer x, b_.Allocate(std::max<int64_t>(bytes, 1)));
    owned_.push_back(x);
    return x;
  }

 private:
  backend::Backend& b_;
  std::vector<backend::Buffer> owned_;
};

}  // namespace paratune::executor
