// cli/commands.h: the `paratune` subcommands. Each takes its arguments (after
// the subcommand name) and the streams to write to, and returns the process
// exit code. Payload goes to `out`, progress and errors to `err`, so that
// `eval "$(paratune plan --format env ...)"` never sees chatter.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace paratune::cli {

// Exit codes shared by every subcommand (docs/cli.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;       // a bug or an unexpected library failure
inline constexpr int kExitUsage = 2;          // bad flags or an invalid request
inline constexpr int kExitNoFeasible = 3;     // plan: no configuration fits
inline constexpr int kExitMeasureFailed = 4;  // profile/confirm: a measurement failed
inline constexpr int kExitTempFail = 75;      // EX_TEMPFAIL: cache locked, try again

struct Io {
  std::istream& in;
  std::ostream& out;
  std::ostream& err;
};

using Args = std::vector<std::string>;

int RunPredict(const Args& args, Io io);
int RunPlan(const Args& args, Io io);
int RunCapacity(const Args& args, Io io);
int RunPresets(const Args& args, Io io);
int RunValidate(const Args& args, Io io);
int RunProfile(const Args& args, Io io);
int RunConfirm(const Args& args, Io io);
int RunCalibrate(const Args& args, Io io);
int RunEmit(const Args& args, Io io);
int RunTune(const Args& args, Io io);
int RunReplan(const Args& args, Io io);

}  // namespace paratune::cli
