"""Lists the names a Megatron-Bridge training script may use, from the source.

    python3 scripts/fwcheck/bridge_fields.py BRIDGE_GIT_DIR MEGATRON_LM_GIT_DIR \
        > tests/frameworks/data/bridge_fields.txt

reads NVIDIA-NeMo/Megatron-Bridge at BRIDGE_COMMIT and the Megatron-LM commit
it pins as 3rdparty/Megatron-LM (both bare or full git directories; `git show`
only) and prints one line per name, with the file and line that define it:

    field SECTION.NAME REPO:PATH:LINE   a dataclass field of the config object
                                        cfg.SECTION holds (the class and the
                                        classes it extends, as CLASSES lists)
    mixed_precision NAME REPO:PATH:LINE a registered mixed-precision recipe
    recipe MODULE.FUNCTION REPO:PATH:LINE  a recipe function
    python MODULE.NAME REPO:PATH:LINE   another name the script imports

tests/frameworks/bridge_rules.h checks every name an emitted script uses
against this list.
"""
import re
import subprocess
import sys

BRIDGE_COMMIT = "067f987df03b8355b03192d88d70f1709fedf51a"
MEGATRON_COMMIT = "2a75ac12c54ba6a42b34024756820bf819a2e25f"  # Bridge's 3rdparty/Megatron-LM

B = "src/megatron/bridge/"
M_TC = "megatron/core/transformer/transformer_config.py"
M_PC = "megatron/core/model_parallel_config.py"
M_TR = "megatron/training/config/training_config.py"
M_CC = "megatron/training/config/common_config.py"
M_RC = "megatron/training/config/resilience_config.py"

# cfg.SECTION -> the classes whose fields it has: the class ConfigContainer
# declares for it (training/config.py:961-1003) and the classes that class
# extends. The model is a GPTModelProvider (gpt_provider.py:129), a Bridge
# TransformerConfig (models/transformer_config.py:134) over Megatron-Core's
# TransformerConfig (transformer_config.py) over ModelParallelConfig; MLA
# providers add Megatron-Core's MLATransformerConfig.
CLASSES = {
    "model": [("bridge", B + "models/gpt_provider.py", "GPTModelProvider"),
              ("bridge", B + "models/transformer_config.py", "TransformerConfig"),
              ("megatron", M_TC, "TransformerConfig"),
              ("megatron", M_TC, "MLATransformerConfig"),
              ("megatron", M_PC, "ModelParallelConfig")],
    "train": [("bridge", B + "training/config.py", "TrainingConfig"),
              ("megatron", M_TR, "TrainingConfig")],
    "ddp": [("bridge", B + "training/config.py", "DistributedDataParallelConfig"),
            ("megatron", "megatron/core/distributed/distributed_data_parallel_config.py",
             "DistributedDataParallelConfig")],
    "optimizer": [("bridge", B + "training/config.py", "OptimizerConfig"),
                  ("megatron", "megatron/core/optimizer/optimizer_config.py", "OptimizerConfig")],
    "dist": [("bridge", B + "training/config.py", "DistributedInitConfig"),
             ("megatron", M_CC, "DistributedInitConfig")],
    "dataset": [("bridge", B + "training/config.py", "GPTDatasetConfig")],
    "tokenizer": [("bridge", B + "training/tokenizers/config.py", "TokenizerConfig"),
                  ("megatron", M_TR, "TokenizerConfig")],
    "checkpoint": [("bridge", B + "training/config.py", "CheckpointConfig"),
                   ("megatron", M_TR, "CheckpointConfig")],
    "rerun_state_machine": [("bridge", B + "training/config.py", "RerunStateMachineConfig"),
                            ("megatron", M_RC, "RerunStateMachineConfig")],
    "comm_overlap": [("bridge", B + "training/comm_overlap.py", "CommOverlapConfig")],
    "": [("bridge", B + "training/config.py", "ConfigContainer")],
}

# The other names a script imports: (module, name).
IMPORTS = [("megatron.bridge.training.pretrain", "pretrain"),
           ("megatron.bridge.training.gpt_step", "forward_step"),
           ("megatron.bridge.training.comm_overlap", "CommOverlapConfig"),
           ("megatron.bridge.training.mixed_precision", "MixedPrecisionConfig"),
           ("megatron.bridge.recipes.common", "_pretrain_common"),
           ("megatron.bridge.models.gpt_provider", "GPTModelProvider")]

RECIPE_FILES = ["llama/h100/llama3.py", "llama/h100/llama2.py", "qwen/h100/qwen3_moe.py",
                "deepseek/h100/deepseek_v2.py", "deepseek/h100/deepseek_v3.py",
                "gpt_oss/h100/gpt_oss.py", "kimi/h100/kimi_k2.py", "olmoe/h100/olmoe_7b.py"]


def show(git_dir, commit, path):
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{path}"],
                          check=True, capture_output=True, text=True).stdout.splitlines()


def class_fields(lines, name):
    """(field, line) of the annotated class attributes of top-level class `name`."""
    out, inside = [], False
    for i, line in enumerate(lines, 1):
        if re.match(rf"class {name}\b", line):
            inside = True
            continue
        if inside and line and not line[0].isspace() and not line.startswith(("#", ")")):
            break
        m = re.match(r"    ([a-z_][a-z0-9_]*)\s*:\s*\S", line) if inside else None
        if m:
            out.append((m.group(1), i))
    if not inside:
        sys.exit(f"class {name} not found")
    return out


def main():
    bridge, megatron = sys.argv[1], sys.argv[2]
    repos = {"bridge": (bridge, BRIDGE_COMMIT, "NVIDIA-NeMo/Megatron-Bridge@067f987"),
             "megatron": (megatron, MEGATRON_COMMIT, "NVIDIA/Megatron-LM@2a75ac1")}
    print(f"# Names a Megatron-Bridge script may use, from Megatron-Bridge {BRIDGE_COMMIT}")
    print(f"# and the Megatron-LM it pins, {MEGATRON_COMMIT}.")
    print("# Written by scripts/fwcheck/bridge_fields.py; do not edit.")
    for section, classes in CLASSES.items():
        seen = set()
        for repo, path, cls in classes:
            git_dir, commit, label = repos[repo]
            for field, line in class_fields(show(git_dir, commit, path), cls):
                key = f"{section}.{field}" if section else field
                if key not in seen:
                    seen.add(key)
                    print(f"field {key} {label}:{path}:{line}")
    mp = B + "training/mixed_precision.py"
    lines = show(bridge, BRIDGE_COMMIT, mp)
    for i, line in enumerate(lines, 1):
        m = re.match(r"def ([a-z0-9_]+)\(\) -> MixedPrecisionConfig", line)
        if m and i > 1 and lines[i - 2].strip() == "@register":
            print(f"mixed_precision {m.group(1)} {repos['bridge'][2]}:{mp}:{i}")
    for module, name in IMPORTS:
        path = "src/" + module.replace(".", "/") + ".py"
        for i, line in enumerate(show(bridge, BRIDGE_COMMIT, path), 1):
            if re.match(rf"(def|class) {name}\b", line):
                print(f"python {module}.{name} {repos['bridge'][2]}:{path}:{i}")
    for f in RECIPE_FILES:
        path = B + "recipes/" + f
        module = "megatron.bridge.recipes." + f[:-3].replace("/", ".")
        for i, line in enumerate(show(bridge, BRIDGE_COMMIT, path), 1):
            m = re.match(r"def ([a-z0-9_]+_pretrain_[a-z0-9_]+_config)\(\)", line)
            if m:
                print(f"recipe {module}.{m.group(1)} {repos['bridge'][2]}:{path}:{i}")


if __name__ == "__main__":
    main()
