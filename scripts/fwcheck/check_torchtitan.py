"""Loads emitted torchtitan configurations with torchtitan's own code.

For every NAME.torchtitan.py in the folder given (with NAME.sidecar.json
beside it), this imports the file as torchtitan's ConfigManager would
(--module), calls paratune_plan() to get the Trainer.Config, re-runs
Trainer.Config.__post_init__ (CUDA graphs vs PP, memory-budget AC, ...),
builds ParallelDims.from_config for the plan's world size (its _validate),
applies the model's update_from_config (TP vs heads, CP backend, tied
embeddings with PP), and computes the pipeline split with torchtitan's
_get_pipeline_metadata and _generate_llm_fqn_per_model_part, which must equal
the split the plan was priced with (sidecar pipeline.chunk_layers). The token
rules of Trainer.__init__ (trainer.py:296-308, 409-428) run inline in the
trainer's constructor, which needs a process group; they are evaluated here
with the same expressions. Prints ACCEPT / REJECT per file and a summary.

Two things the files need from the machine that runs them are answered as
that machine would: the GPU's compute capability (float8's converter asks for
SM89+, components/quantization/float8.py:85-97; answered from the plan's
cluster in the sidecar), and, for a model torchtitan has no configuration of,
the user's `my_model_config.base_config()` the file imports (answered with
torchtitan's own llama3_debugmodel Trainer.Config: the checks here read the
parallelism, batch and pipeline fields paratune writes over it).

Usage: python3 check_torchtitan.py DIR   (the torchtitan checkout on sys.path)
"""
import importlib.util
import json
import sys
import traceback
import types

import stubs  # noqa: F401
from verdicts import check_folder


def schedule_is_single(name):
    """torch.distributed.pipelining's classes for the schedules paratune writes:
    1F1B and GPipe are PipelineScheduleSingle, Interleaved1F1B and the looped
    ones PipelineScheduleMulti (torch/distributed/pipelining/schedules.py)."""
    try:
        from torch.distributed.pipelining.schedules import get_schedule_class, PipelineScheduleSingle
        cls = get_schedule_class(name)
        # Under the stand-ins (stubs.py) the import succeeds with empty classes
        # that answer nothing: only PyTorch's own classes are asked.
        if getattr(cls, '__module__', '') != 'torch.distributed.pipelining.schedules':
            raise ImportError('no torch.distributed.pipelining here')
        if isinstance(cls, type) and issubclass(cls, PipelineScheduleSingle):
            return True
        if isinstance(cls, type):
            return False
    except Exception:
        pass
    known = {'1F1B': True, 'GPipe': True, 'Interleaved1F1B': False, 'LoopedBFS': False,
             'InterleavedZeroBubble': False, 'ZBVZeroBubble': False, 'DualPipeV': False}
    if name not in known:
        raise ValueError(f'unknown pipeline schedule {name}')
    return known[name]


# Compute capability of the GPU of a cluster preset, by its name.
def capability(cluster):
    name = cluster.lower()
    for prefix, cc in (('gb', (10, 0)), ('b2', (10, 0)), ('b3', (10, 0)), ('dgx-b', (10, 0)),
                       ('h', (9, 0)), ('dgx-h', (9, 0)), ('gh', (9, 0)), ('a100', (8, 0)),
                       ('dgx-a100', (8, 0)), ('v100', (7, 0))):
        if name.startswith(prefix) or prefix in name:
            return cc
    return (0, 0)


def answer_as_the_plans_machine(side):
    cc = capability(str(side['job']['cluster']))
    try:
        from torchtitan.components.quantization import float8
        float8.has_cuda_capability = lambda major, minor: cc >= (major, minor)
    except ImportError:
        pass
    if 'my_model_config' not in sys.modules:
        from torchtitan.models.llama3.config_registry import llama3_debugmodel
        mod = types.ModuleType('my_model_config')
        mod.base_config = llama3_debugmodel
        sys.modules['my_model_config'] = mod


def check(path):
    side = json.load(open(path[:-len('.torchtitan.py')] + '.sidecar.json'))
    world = side['job']['gpus']
    try:
        answer_as_the_plans_machine(side)
        spec = importlib.util.spec_from_file_location('paratune_plan', path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        cfg = mod.paratune_plan()
        cfg.__post_init__()
        from torchtitan.distributed import ParallelDims
        pd = ParallelDims.from_config(cfg.parallelism, world)
        model = cfg.model_spec.model
        model.update_from_config(config=cfg)
        # trainer.py:296-308
        tokens = cfg.training.num_tokens_per_microbatch_per_dp_rank
        divisor = (pd.tp if cfg.parallelism.enable_sequence_parallel else 1) * (2 * pd.cp if pd.cp > 1 else 1)
        if tokens % divisor:
            return 'REJECT', f'tokens per micro-batch {tokens} not divisible by {divisor}'
        # trainer.py:409-428
        nmb = cfg.parallelism.num_pp_microbatches if pd.pp > 1 else 1
        dp = pd.dp_replicate * pd.dp_shard
        per_dp = tokens * nmb
        step = cfg.training.num_tokens_per_train_step
        if step < 0:
            step = per_dp * dp
        if step % (per_dp * dp):
            return 'REJECT', f'num_tokens_per_train_step {step} not divisible by {per_dp * dp}'
        got = None
        if pd.pp > 1:
            from torchtitan.distributed import pipeline_parallel as ppm
            single = schedule_is_single(cfg.parallelism.pipeline_parallel_schedule)
            # torchtitan asks torch which schedule class a name is; answer with
            # the class kinds it tests (single-stage or looped).
            ppm.PipelineScheduleSingle = type('Single', (), {})
            ppm.PipelineScheduleMulti = type('Multi', (), {})
            ppm.get_schedule_class = lambda name: (ppm.PipelineScheduleSingle if schedule_is_single(name)
                                                   else ppm.PipelineScheduleMulti)
            stages, layers, w_in, w_out = ppm._get_pipeline_metadata(pd, cfg.parallelism, model)
            parts = ppm._generate_llm_fqn_per_model_part(stages, layers, w_in, w_out)
            got = [sum(1 for m in p if m.startswith('layers.')) for p in parts]
            if single and stages != pd.pp:
                return 'REJECT', f'{stages} stages for a single-stage schedule on pp {pd.pp}'
        want = side.get('pipeline', {}).get('chunk_layers')
        if want is not None and got != want:
            return 'REJECT', f'torchtitan splits layers per stage {got}, the plan priced {want}'
        return 'ACCEPT', f'dp_replicate {pd.dp_replicate} dp_shard {pd.dp_shard} tp {pd.tp} cp {pd.cp} pp {pd.pp}' + \
            (f', layers per stage {got}' if got else '')
    except BaseException as e:
        msg = ''.join(traceback.format_exception_only(type(e), e)).strip().splitlines()[-1]
        return 'REJECT', msg


def main():
    return check_folder('torchtitan', sys.argv[1], '.torchtitan.py', check)


if __name__ == '__main__':
    sys.exit(main())
