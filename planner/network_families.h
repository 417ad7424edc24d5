// planner/network_families.h: the family builders of network.h (ResNet and
// ResNeXt, RetinaNet, the latent-diffusion U-Net, FLUX's and SD3's DiT, ViT
// and DiT, Wan2.1's video DiT, MLPerf's 3D U-Net, 3D CNNs, dense networks,
// GANs) and the strict readers
// they share with the explicit layer form. Internal to planner/.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "planner/network.h"

namespace paratune::planner::network_detail {

// A list of 1 to 64 positive integers (at most 2^24); a missing key is an
// error when `required`, else leaves *out unchanged.
Status PositiveList(ObjectReader& r, std::string_view key, std::vector<int64_t>* out, bool required);
// An optional integer in [1, max]; a missing key leaves *out unchanged.
Status PositiveInt(ObjectReader& r, std::string_view key, int64_t* out, int64_t max = int64_t{1} << 24);

// The family builders' names, in the order they are listed.
std::vector<std::string> FamilyNames();
// Expands `family` from its architecture object into layers. NotFound for a
// family that is not one of FamilyNames(); InvalidArgument naming the key
// for an architecture it refuses.
Status BuildFamily(const std::string& family, ObjectReader& architecture, std::vector<NetLayer>* out);

}  // namespace paratune::planner::network_detail
