// common/user_input.h: reading input as people type it. A name that matches
// nothing gets the closest known names ("did you mean ...?"), and a count of
// tokens or sequences may carry a size suffix (8k, 128K, 1M) or be a power
// (2^20). The CLI's flags and presets and the service's requests use these,
// so a typo gets the same help on every path.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace paratune {

// Up to `max_names` of `known` closest to `typed`, closest first (ties in the
// order of `known`). Compared without case: a name is close when its edit
// distance (insertions, deletions, substitutions and swaps of neighbours) is
// at most a third of `typed`'s length (at least 1, at most 3), when `typed`
// begins it ("h100" for "h100-sxm"), or when it begins `typed` and has three
// characters or more past any leading dashes ("llama3.1-8b-instruct" for
// "llama3.1-8b"). Empty when none is close.
std::vector<std::string> ClosestNames(std::string_view typed, const std::vector<std::string>& known,
                                      size_t max_names = 3);

// "did you mean a, b or c?" over ClosestNames, or "" when none is close.
std::string DidYouMean(std::string_view typed, const std::vector<std::string>& known);

// The forms ParseCount accepts, for error messages and help texts.
inline constexpr const char* kCountForms =
    "an integer (8192), with a binary suffix (8k or 8K = 8192, 128K = 131072, 1M = 1048576, "
    "1G = 2^30) or a power (2^20)";

// A non-negative count: "8192", "8k"/"8K" (×1024), "1m"/"1M" (×2^20),
// "1g"/"1G" (×2^30), or "B^E" with integers B and E ("2^20"). Suffixes are
// binary, so 8k is 8192 and 128K is 131072, the lengths people mean. A result
// beyond int64, a negative, a fraction or anything else is kInvalidArgument
// "<what>: '<text>' is not a count (accepted: <kCountForms>)".
Result<int64_t> ParseCount(std::string_view text, const std::string& what);

}  // namespace paratune
