// cli/cmd_network.h: predict and plan for networks that are not transformer
// stacks (`--network`), called by `paratune predict` and `paratune plan`.
#pragma once

#include "cli/commands.h"
#include "cli/flags.h"

namespace paratune::cli {

// The flags these read (besides --network): --cluster --gpus --global-batch
// --precision --grad-bytes --optimizer-state-bytes --format; predict also
// --micro-batch --spatial --tensor --sharding, plan --headroom --top.
inline constexpr const char* kNetworkFlags[] = {"--network",    "--micro-batch", "--spatial",
                                                "--tensor",     "--sharding",    "--grad-bytes",
                                                "--optimizer-state-bytes", "--recompute", "--sequence"};

int PredictNetworkCommand(const Flags& flags, Io io);
int PlanNetworkCommand(const Flags& flags, Io io);
// capacity --network: the largest input that fits (--max-size; exit 3 when
// nothing fits).
int CapacityNetworkCommand(const Flags& flags, Io io);

}  // namespace paratune::cli
