// tests/cli/call.h: runs one `paratune` subcommand in process, the way the CLI
// tests call them: arguments (and stdin) in, exit code and both output streams
// out; `progress` as main() sets it for a terminal.
#pragma once

#include <sstream>
#include <string>

#include "cli/commands.h"

namespace paratune::cli {

struct Outcome {
  int code;
  std::string out, err;
};

inline Outcome Call(int (*fn)(const Args&, Io), const Args& args,
                    const std::string& stdin_text = "", bool progress = false) {
  std::istringstream in(stdin_text);
  std::ostringstream out, err;
  int code = fn(args, Io{in, out, err, progress});
  return {code, out.str(), err.str()};
}

}  // namespace paratune::cli
