// common/enum_names.h: an enum's names (or any per-value figure) held in one
// table indexed by the value, so that printing a value, parsing a name and
// listing the names in an error all read the same list. The enums these serve
// count from 0 in declaration order; a table is declared next to its enum's
// functions, with a static_assert on its size where the enum has a count.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "common/status.h"

namespace paratune {

// The index of `e` in its table.
template <class E>
constexpr size_t EnumIndex(E e) {
  return static_cast<size_t>(static_cast<std::underlying_type_t<E>>(e));
}

// table[e], or `fallback` for a value past the table.
template <class E, class T, size_t N>
constexpr T EnumLookup(E e, const T (&table)[N], T fallback) {
  const size_t i = EnumIndex(e);
  return i < N ? table[i] : fallback;
}

// The name of `e`; "?" for a value past the table.
template <class E, size_t N>
constexpr const char* EnumName(E e, const char* const (&names)[N]) {
  return EnumLookup<E, const char*, N>(e, names, "?");
}

// The value named `name`, or nullopt.
template <class E, size_t N>
constexpr std::optional<E> EnumFromName(std::string_view name, const char* const (&names)[N]) {
  for (size_t i = 0; i < N; ++i) {
    if (name == names[i]) return static_cast<E>(i);
  }
  return std::nullopt;
}

// "a, b, c" (or "a | b | c" with sep " | "): the names, for an error that
// lists what is accepted.
template <size_t N>
std::string EnumNameList(const char* const (&names)[N], std::string_view sep = ", ") {
  std::string out;
  for (size_t i = 0; i < N; ++i) {
    if (i > 0) out += sep;
    out += names[i];
  }
  return out;
}

// The value named `name`, or kInvalidArgument "'<name>' is not <what> (a | b | c)",
// `what` with its article ("a pipeline split"): the error of the planner's names.
template <class E, size_t N>
Result<E> ParseEnumName(const std::string& name, const char* const (&names)[N],
                        const std::string& what) {
  if (auto e = EnumFromName<E>(name, names)) return *e;
  return Status::InvalidArgument("'" + name + "' is not " + what + " (" +
                                 EnumNameList(names, " | ") + ")");
}

// The value named `name`, or kInvalidArgument "unknown <what> '<name>' (valid: a, b, c)":
// the error of the topology's names.
template <class E, size_t N>
Result<E> ParseKnownEnumName(const std::string& name, const char* const (&names)[N],
                             const std::string& what) {
  if (auto e = EnumFromName<E>(name, names)) return *e;
  return Status::InvalidArgument("unknown " + what + " '" + name +
                                 "' (valid: " + EnumNameList(names) + ")");
}

}  // namespace paratune
