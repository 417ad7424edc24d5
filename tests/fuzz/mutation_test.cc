// A bounded, deterministic mutation run over every document paratune reads:
// from real seed documents, a fixed number of seeded mutations
// each — byte edits, splices, and JSON-aware edits that put extreme values
// (huge, negative, zero, NaN-like, wrong types) where the parsers expect sane
// ones — fed through the real CLI commands. Every input must end in exit 0,
// a documented exit 2 with a message (or 3: plan found nothing that fits),
// within the time limit; a crash, an exception, a sanitizer report or a hang
// fails the test with the input saved. PARATUNE_FUZZ_ITERATIONS overrides the
// count per document; the seed is fixed, so a failure reproduces.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/json.h"
#include "documents.h"

namespace paratune::fuzz {
namespace {

constexpr uint64_t kSeed = 0x7061726174756e65;  // "paratune"
constexpr int kDefaultIterations = 150;
constexpr double kLimitPerInputS = 10.0;

// Values that break assumptions: bounds, signs, sizes, types.
const char* const kInteresting[] = {
    "0", "-1", "1", "2", "3", "7", "1e308", "-1e308", "1e-308", "4294967296", "2147483648",
    "9223372036854775807", "-9223372036854775808", "18446744073709551616", "16777217", "65536",
    "1.5", "0.0", "-0.0", "true", "null", "\"\"", "\"x\"", "[]", "{}", "[1,2]", "1e999"};

int Iterations() {
  if (const char* v = std::getenv("PARATUNE_FUZZ_ITERATIONS")) return std::max(1, std::atoi(v));
  return kDefaultIterations;
}

// Every leaf of a JSON value, as pointers into it.
void Leaves(Json& j, std::vector<Json*>* out, std::vector<std::pair<Json*, std::string>>* keys) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      keys->push_back({&j, it.key()});
      Leaves(it.value(), out, keys);
    }
  } else if (j.is_array()) {
    for (Json& e : j) Leaves(e, out, keys);
  } else {
    out->push_back(&j);
  }
}

// One JSON-aware mutation of `text`; "" when it is not JSON.
std::string MutateJson(const std::string& text, std::mt19937_64& rng) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return "";
  const int edits = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < edits; ++e) {
    std::vector<Json*> leaves;
    std::vector<std::pair<Json*, std::string>> keys;
    Leaves(j, &leaves, &keys);
    const int kind = static_cast<int>(rng() % 4);
    if (kind <= 1 && !leaves.empty()) {
      Json* leaf = leaves[rng() % leaves.size()];
      *leaf = Json::parse(kInteresting[rng() % std::size(kInteresting)], nullptr, false);
      if (leaf->is_discarded()) *leaf = 1e300;
    } else if (kind == 2 && !keys.empty()) {
      auto& [obj, key] = keys[rng() % keys.size()];
      obj->erase(key);
    } else if (!leaves.empty() && leaves[rng() % leaves.size()]->is_number()) {
      Json* leaf = leaves[rng() % leaves.size()];
      if (leaf->is_number()) *leaf = leaf->get<double>() * (rng() % 2 ? 1e6 : -1.0);
    } else if (!keys.empty()) {
      auto& [obj, key] = keys[rng() % keys.size()];
      (*obj)[key + "_x"] = 1;  // an unknown key
    }
  }
  return j.dump();
}

// One byte-level mutation: flip, insert, delete, duplicate, or an interesting token.
std::string MutateBytes(std::string s, std::mt19937_64& rng) {
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    const size_t n = s.size();
    const size_t at = n ? rng() % n : 0;
    switch (rng() % 6) {
      case 0:
        if (n) s[at] = static_cast<char>(s[at] ^ (1u << (rng() % 8)));
        break;
      case 1:
        s.insert(at, 1, static_cast<char>(rng() % 256));
        break;
      case 2:
        if (n) s.erase(at, 1 + rng() % std::min<size_t>(n - at, 64));
        break;
      case 3:
        if (n) s.insert(at, s.substr(at, 1 + rng() % std::min<size_t>(n - at, 256)));
        break;
      case 4:
        s.insert(at, kInteresting[rng() % std::size(kInteresting)]);
        break;
      default:
        // Replace a run of digits with an extreme number.
        if (n) {
          size_t d = s.find_first_of("0123456789", at);
          if (d != std::string::npos) {
            size_t end = s.find_first_not_of("0123456789.", d);
            s.replace(d, (end == std::string::npos ? s.size() : end) - d,
                      kInteresting[rng() % 17]);
          }
        }
    }
  }
  return s;
}

class Mutation : public ::testing::TestWithParam<Document> {};

TEST_P(Mutation, EveryInputEndsInADocumentedExit) {
  const Document doc = GetParam();
  const auto scratch = std::filesystem::temp_directory_path() /
                       ("paratune_fuzz_" + std::string(DocumentName(doc)) + "_" +
                        std::to_string(::getpid()));
  std::filesystem::remove_all(scratch);
  std::filesystem::create_directories(scratch);
  Harness h(PARATUNE_SOURCE_DIR, scratch.string());
  const std::vector<std::string> seeds = h.Seeds(doc);
  ASSERT_FALSE(seeds.empty());
  // The seeds themselves are valid documents.
  for (const std::string& s : seeds) {
    Verdict v = h.Run(doc, s);
    ASSERT_TRUE(v.violation.empty()) << v.violation << "\n" << v.err;
    EXPECT_EQ(v.code, 0) << DocumentName(doc) << " seed rejected: " << v.err;
  }
  std::mt19937_64 rng(kSeed ^ static_cast<uint64_t>(doc));
  const int n = Iterations();
  int ok = 0, usage = 0, other = 0;
  double slowest_s = 0;
  for (int i = 0; i < n; ++i) {
    const std::string& seed = seeds[rng() % seeds.size()];
    std::string input = (rng() % 2) ? MutateJson(seed, rng) : "";
    if (input.empty()) input = MutateBytes(seed, rng);
    // Keep the input for reproduction if the run dies.
    { std::ofstream(scratch / "current_input", std::ios::binary | std::ios::trunc) << input; }
    const auto t0 = std::chrono::steady_clock::now();
    Verdict v = h.Run(doc, input);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    slowest_s = std::max(slowest_s, s);
    const std::string where = std::string(DocumentName(doc)) + " input " + std::to_string(i) + ":\n" +
                              input.substr(0, 2000) + "\n--- stderr:\n" + v.err;
    ASSERT_TRUE(v.violation.empty()) << v.violation << " for " << where;
    ASSERT_LT(s, kLimitPerInputS) << "took " << s << " s for " << where;
    (v.code == 0 ? ok : v.code == 2 ? usage : other)++;
  }
  // Mutations that never reach a parser's checks would prove nothing.
  EXPECT_GT(usage, 0);
  std::printf("[fuzz] %s: %d inputs, %d accepted, %d rejected with exit 2, %d exit 3; "
              "slowest %.3f s\n",
              DocumentName(doc), n, ok, usage, other, slowest_s);
  std::filesystem::remove_all(scratch);
}

INSTANTIATE_TEST_SUITE_P(Documents, Mutation, ::testing::ValuesIn(kAllDocuments),
                         [](const auto& test_info) { return std::string(DocumentName(test_info.param)); });

}  // namespace
}  // namespace paratune::fuzz
