// tests/cli/call.h: runs one `paratune` subcommand in process, the way the CLI
// tests call them: arguments in, exit code and both output streams out.
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
                    const std::string& stdin_text = "") {
  std::istringstream in(stdin_text);
  std::ostringstream out, err;
  int code = fn(args, Io{in, out, err});
  return {code, out.str(), err.str()};
}

}  // namespace paratune::cli
