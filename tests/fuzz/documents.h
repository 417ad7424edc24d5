// tests/fuzz/documents.h: every document paratune reads, fed to the real CLI
// command that reads it (in process, with the same flags a user would pass).
// Shared by the deterministic mutation test (mutation_test.cc, CTest) and the
// libFuzzer targets (libfuzzer_main.cc, built with clang when asked for).
//
// The contract a run checks: the command returns 0 (it was valid), 2 (a
// usage/input error, with a message on stderr naming what is wrong) or 3
// (plan: nothing fits); anything else — another code, an exception, a crash,
// a sanitizer report, a run longer than the time limit — is a finding.
#pragma once

#include <string>
#include <vector>

namespace paratune::fuzz {

enum class Document {
  kPredictRequest,  // predict --request -
  kPlanRequest,     // plan --request -
  kModelFile,       // predict --model FILE (paratune's model object)
  kHfConfig,        // predict --model FILE (a Hugging Face config.json)
  kClusterFile,     // predict --cluster FILE
  kProfile,         // predict --profile FILE
  kNcclTestsLog,    // profile import LOG
  kRunReport,       // calibrate --reports FILE --profile P
};
inline constexpr Document kAllDocuments[] = {
    Document::kPredictRequest, Document::kPlanRequest, Document::kModelFile,
    Document::kHfConfig,       Document::kClusterFile, Document::kProfile,
    Document::kNcclTestsLog,   Document::kRunReport};

// "predict_request", "plan_request", ...
const char* DocumentName(Document d);

struct Verdict {
  int code = 0;
  std::string err;        // the command's stderr
  std::string violation;  // "" when the outcome keeps the contract, else why not
};

// The files the harness needs besides the input (a profile for calibrate, a
// scratch directory). Made once per process; `source_dir` is the repository.
class Harness {
 public:
  // Writes its scratch files under `scratch_dir` (which must exist).
  Harness(std::string source_dir, std::string scratch_dir);

  // The seed inputs for `d`: real documents from the repository (presets,
  // test logs) and ones made by paratune itself (a profile, a run report).
  std::vector<std::string> Seeds(Document d);

  // Runs the command that reads `d` on `input` and judges the outcome.
  Verdict Run(Document d, const std::string& input);

 private:
  std::string Write(const std::string& name, const std::string& text);
  std::string source_, scratch_;
  std::string profile_path_;  // a valid profile (calibrate needs one beside the report)
  std::string report_seed_, profile_seed_;
};

}  // namespace paratune::fuzz
