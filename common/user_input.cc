#include "common/user_input.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include "common/strings.h"

namespace paratune {

namespace {

// The optimal-string-alignment distance: insertions, deletions,
// substitutions and transpositions of neighbours ("megatorn" is one from
// "megatron"), each costing one.
size_t EditDistance(std::string_view a, std::string_view b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

// Characters of `s` after its leading dashes ("--seq" has three).
size_t LengthPastDashes(std::string_view s) {
  const size_t first = s.find_first_not_of('-');
  return first == std::string_view::npos ? 0 : s.size() - first;
}

// The length of the longest common prefix of `a` and `b` plus that of their
// longest common suffix (at most the shorter length).
size_t SharedEnds(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  size_t front = 0, back = 0;
  while (front < n && a[front] == b[front]) ++front;
  while (back < n - front && a[a.size() - 1 - back] == b[b.size() - 1 - back]) ++back;
  return front + back;
}

// Names are matched without case; typed text beyond this length (a pasted
// document, an attack) is compared by its prefix only, so that the distance
// table stays small.
constexpr size_t kMaxComparedLength = 128;

}  // namespace

std::vector<std::string> ClosestNames(std::string_view typed, const std::vector<std::string>& known,
                                      size_t max_names) {
  const std::string t = AsciiLower(typed.substr(0, kMaxComparedLength));
  const size_t limit = std::clamp<size_t>(t.size() / 3, 1, 3);
  struct Scored {
    size_t score;
    size_t shared;  // ties: more characters shared at both ends first
    size_t index;
  };
  std::vector<Scored> close;
  for (size_t i = 0; i < known.size(); ++i) {
    const std::string k = AsciiLower(std::string_view(known[i]).substr(0, kMaxComparedLength));
    size_t score = EditDistance(t, k);
    // A known name the typed text begins ("h100" of "h100-sxm") ranks with a
    // one-character slip, one that begins the typed text ("llama3.1-8b" of
    // "llama3.1-8b-instruct") with a two-character one; both are close.
    bool prefix = false;
    if (LengthPastDashes(t) >= 2 && k.rfind(t, 0) == 0) {
      score = std::min<size_t>(score, 1);
      prefix = true;
    } else if (LengthPastDashes(k) >= 3 && t.rfind(k, 0) == 0) {
      score = std::min<size_t>(score, 2);
      prefix = true;
    }
    if (score <= limit || prefix) close.push_back({score, SharedEnds(t, k), i});
  }
  // "llama3-405b" is as far from "llama3-70b" as from "llama3.1-405b"; the
  // one that keeps both of its ends is what was meant.
  std::stable_sort(close.begin(), close.end(), [](const Scored& a, const Scored& b) {
    return a.score != b.score ? a.score < b.score : a.shared > b.shared;
  });
  std::vector<std::string> out;
  for (const Scored& s : close) {
    if (out.size() >= max_names) break;
    out.push_back(known[s.index]);
  }
  return out;
}

std::string DidYouMean(std::string_view typed, const std::vector<std::string>& known) {
  const std::vector<std::string> names = ClosestNames(typed, known);
  if (names.empty()) return "";
  std::string out = "did you mean ";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += names[i];
  }
  return out + "?";
}

namespace {

// Whether `s` is, in full, a non-negative decimal integer that fits int64 (into *out).
bool ParseDigits(std::string_view s, int64_t* out) {
  if (s.empty() || s.front() < '0' || s.front() > '9') return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

// a × b, or false when it leaves int64.
bool Multiply(int64_t a, int64_t b, int64_t* out) {
  if (a != 0 && b > std::numeric_limits<int64_t>::max() / a) return false;
  *out = a * b;
  return true;
}

}  // namespace

Result<int64_t> ParseCount(std::string_view text, const std::string& what) {
  const std::string t = Trim(text);
  auto refuse = [&] {
    // Long garbage is quoted by its start only.
    const std::string shown = t.size() > 40 ? t.substr(0, 40) + "..." : t;
    return Status::InvalidArgument(what + ": '" + shown + "' is not a count (accepted: " +
                                   kCountForms + ")");
  };
  if (const size_t caret = t.find('^'); caret != std::string::npos) {
    int64_t base = 0, exponent = 0;
    if (!ParseDigits(std::string_view(t).substr(0, caret), &base) ||
        !ParseDigits(std::string_view(t).substr(caret + 1), &exponent)) {
      return refuse();
    }
    int64_t v = 1;
    for (int64_t i = 0; i < exponent; ++i) {
      if (!Multiply(v, base, &v)) return refuse();
      if (v == 0 || v == 1) break;  // 0^E and 1^E stay put: no need to loop E times
    }
    return v;
  }
  int64_t mult = 1;
  std::string_view digits = t;
  if (!digits.empty()) {
    switch (digits.back()) {
      case 'k': case 'K': mult = int64_t{1} << 10; break;
      case 'm': case 'M': mult = int64_t{1} << 20; break;
      case 'g': case 'G': mult = int64_t{1} << 30; break;
      default: break;
    }
    if (mult != 1) digits.remove_suffix(1);
  }
  int64_t v = 0;
  if (!ParseDigits(digits, &v) || !Multiply(v, mult, &v)) return refuse();
  return v;
}

}  // namespace paratune
