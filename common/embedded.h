// common/embedded.h: presets compiled into the binary (see cmake/EmbedPresets.cmake).
#pragma once

#include <string_view>
#include <vector>

namespace paratune {

struct EmbeddedPreset {
  std::string_view name;  // file name without ".json"
  std::string_view text;  // the JSON document
};

}  // namespace paratune
