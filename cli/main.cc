// paratune: tells people who train large models on GPU clusters how to
// parallelize a run. This file only dispatches to the subcommands.
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace {

constexpr const char* kUsage = R"(usage: paratune <command> [options]   (paratune <command> --help for details)

Plan a training run before spending GPU-hours on it:
  plan       search every parallel configuration and rank them (dry run)
  predict    predict time and memory per GPU for one configuration
  capacity   the longest sequence / largest model that fits
  presets    list the built-in models, GPUs and clusters
  validate   compare predictions with published measured runs
  profile    measure this cluster (GEMMs, links, collectives) or import nccl-tests logs
  confirm    run the top plans on real kernels (cuBLAS + NCCL, or MPI/CPU) and report
             measured vs predicted
  calibrate  fit correction factors from run reports into a profile
  emit       write a plan as Megatron-LM / DeepSpeed / AxoNN / torchtitan config or shell exports
  tune       in a job script: find the allocation, profile (cached), plan, confirm,
             and print `export TP=... PP=...` lines for eval
  replan     nodes lost or added: the next best plan and the reshard map to it
  version    print the version

Quick start:
  paratune plan --model gpt3-175b --cluster dgx-a100-80gb --gpus 1024 --global-batch 1536
)";

struct Command {
  const char* name;
  int (*run)(const paratune::cli::Args&, paratune::cli::Io);
};

}  // namespace

int main(int argc, char** argv) {
  using namespace paratune::cli;
  const Command commands[] = {
      {"predict", RunPredict},
      {"plan", RunPlan},
      {"capacity", RunCapacity},
      {"presets", RunPresets},
      {"validate", RunValidate},
      {"profile", RunProfile},
      {"confirm", RunConfirm},
      {"calibrate", RunCalibrate},
      {"emit", RunEmit},
      {"tune", RunTune},
      {"replan", RunReplan},
  };
  Io io{std::cin, std::cout, std::cerr};
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    std::cout << kUsage;
    return argc < 2 ? kExitUsage : kExitOk;
  }
  const std::string cmd = argv[1];
  if (cmd == "version" || cmd == "--version") {
    std::cout << "paratune " << PARATUNE_VERSION << "\n";
    return kExitOk;
  }
  Args args(argv + 2, argv + argc);
  for (const Command& c : commands) {
    if (cmd == c.name) {
      try {
        return c.run(args, io);
      } catch (const std::exception& e) {
        std::cerr << "paratune " << cmd << ": internal error: " << e.what() << "\n";
        return kExitInternal;
      }
    }
  }
  std::cerr << "paratune: unknown command '" << cmd << "'\n\n" << kUsage;
  return kExitUsage;
}
