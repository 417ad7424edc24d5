// cli/version.h: the version the `paratune` build carries, as the documents
// the CLI writes record it (run reports, profiles, the service's /v1/version).
#pragma once

#include <string>

namespace paratune::cli {

// "0.1.0"; "dev" where the build defines no version.
const char* Version();
// "paratune 0.1.0": the `tool` field of the documents the CLI writes.
std::string ToolName();

}  // namespace paratune::cli
