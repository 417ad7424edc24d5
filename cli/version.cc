#include "cli/version.h"

// The executable's build defines the version; a bare library build does not.
#ifndef PARATUNE_VERSION
#define PARATUNE_VERSION "dev"
#endif

namespace paratune::cli {

const char* Version() { return PARATUNE_VERSION; }

std::string ToolName() { return std::string("paratune ") + Version(); }

}  // namespace paratune::cli
