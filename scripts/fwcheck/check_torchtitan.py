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

Parameters: for a file on one of torchtitan's model flavours, the model is
built as the trainer builds it (trainer.py:337-360: update_from_config, then
model_config.build() on the meta device) and counted with the flavour's own
get_nparams_and_flops (trainer.py:380-386; models/utils.py:436 for dense
models, 493-509 for MoE ones: the sum of p.numel() over the model's
parameters); the count must equal paratune's ModelSpec::ParamCount of the
sidecar's job.model, read from `paratune presets models --format json`
(PARATUNE, default build/cli/paratune). The ACCEPT reason carries `params N`;
a file on the user's own base_config carries `params: the user's model`.
Building on PyTorch 1.13 takes three stand-ins for newer PyTorch, none of
which holds a parameter torchtitan does not define: nn.RMSNorm (PyTorch 2.4's
weight of normalized_shape), no-op state-dict hooks, and a meta-device mode
(torch.device('meta') is a context manager from PyTorch 2.0 on).

Two things the files need from the machine that runs them are answered as
that machine would: the GPU's compute capability (float8's converter asks for
SM89+, components/quantization/float8.py:85-97; answered from the plan's
cluster in the sidecar), and, for a model torchtitan has no configuration of,
the user's `my_model_config.base_config()` the file imports (answered with
torchtitan's own llama3_debugmodel Trainer.Config: the checks here read the
parallelism, batch and pipeline fields paratune writes over it).

Usage: python3 check_torchtitan.py DIR   (the torchtitan checkout on sys.path)
"""
import decimal
import importlib.util
import json
import numbers
import subprocess
import sys
import traceback
import types

import stubs
from verdicts import PARATUNE, check_folder

import torch
from torch import nn


# Newer PyTorch that building torchtitan's models needs, for an older PyTorch
# (Debian's 1.13). Installed before torchtitan is imported: its RMSNorm
# subclasses nn.RMSNorm (models/common/nn_modules.py:134), which stubs.py
# would otherwise answer with an empty stand-in that builds no weight.
if 'RMSNorm' not in vars(nn):
    class RMSNorm(nn.Module):
        """The parameters of PyTorch's nn.RMSNorm (torch/nn/modules/normalization.py,
        2.4+): one weight of normalized_shape when elementwise_affine."""

        def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
            super().__init__()
            if isinstance(normalized_shape, numbers.Integral):
                normalized_shape = (normalized_shape,)
            self.normalized_shape = tuple(normalized_shape)
            self.eps = eps
            self.elementwise_affine = elementwise_affine
            if elementwise_affine:
                self.weight = nn.Parameter(torch.empty(self.normalized_shape, device=device, dtype=dtype))
                nn.init.ones_(self.weight)
            else:
                self.register_parameter('weight', None)

        def forward(self, x):
            y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + (self.eps or torch.finfo(x.dtype).eps))
            return y * self.weight if self.weight is not None else y

    nn.RMSNorm = RMSNorm
# State-dict hooks (FusedQKVLinear registers one, models/common/attention.py:752):
# they convert checkpoints and hold no parameters.
for _hook in ('register_state_dict_post_hook', 'register_state_dict_pre_hook',
              'register_load_state_dict_pre_hook', 'register_load_state_dict_post_hook'):
    if not hasattr(nn.Module, _hook):
        setattr(nn.Module, _hook, lambda self, *a, **k: None)


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


def on_meta():
    """The trainer's `with torch.device("meta")` (trainer.py:356-360). Before
    PyTorch 2.0 a device is no context manager: a torch-function mode gives the
    factory functions device='meta' as torch/utils/_device.py (2.x) does, and
    answers torch.polar (no meta kernel in 1.13; the RoPE cache, a buffer,
    models/common/rope.py:232) with an empty complex tensor of its shape."""
    if hasattr(torch.device, '__enter__'):
        return torch.device('meta')
    from torch.overrides import TorchFunctionMode
    factories = {getattr(torch, n) for n in (
        'empty', 'empty_strided', 'zeros', 'ones', 'full', 'rand', 'randn', 'randint', 'randperm',
        'arange', 'range', 'linspace', 'logspace', 'eye', 'tensor', 'as_tensor', 'scalar_tensor',
        'tril_indices', 'triu_indices') if hasattr(torch, n)}

    class Meta(TorchFunctionMode):
        def __torch_function__(self, func, types_, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func in factories and kwargs.get('device') is None:
                kwargs['device'] = 'meta'
            if func is torch.polar and args and args[0].is_meta:
                shape = torch.broadcast_shapes(args[0].shape, args[1].shape)
                dtype = torch.complex128 if args[0].dtype == torch.float64 else torch.complex64
                return torch.empty(shape, dtype=dtype, device='meta')
            return func(*args, **kwargs)
    return Meta()


def torchtitan_params(cfg, model_config):
    """The parameters torchtitan builds for the file's model: the model built as
    trainer.py:337-360 builds it (model_config has had update_from_config) and
    counted by the flavour's get_nparams_and_flops (trainer.py:380-386), which
    sums p.numel() over the model's parameters (models/utils.py:436 dense,
    493-509 MoE)."""
    with on_meta():
        model = model_config.build()
    # A part that an empty stand-in (stubs.py) answered for holds no parameters:
    # the count would be short, so it is not taken.
    stand_ins = [f'{name}.{attr}' if name else attr for name, module in model.named_modules()
                 for attr, value in vars(module).items() if isinstance(value, getattr(stubs, '_Meta', ()))]
    if stand_ins:
        raise RuntimeError(f'cannot count torchtitan\'s parameters: {", ".join(stand_ins[:3])} '
                           'built by a stand-in (stubs.py)')
    nparams, _ = model_config.get_nparams_and_flops(model, cfg.training.max_context_length)
    return int(nparams)


_paratune_models = None


def paratune_params(name):
    """paratune's ModelSpec::ParamCount of the preset NAME, exactly.
    `presets models --format json` prints params_B = ParamCount / 1e9 as a double
    (cli/cmd_presets.cc:66-67) in digits that read back as that double
    (nlohmann::json). Below 2**53 the count converts to a double exactly, and
    below 2e15 (2e6 billion) the doubles N / 1e9 of consecutive counts differ
    (their spacing, 1e-9, is above the double's ulp there), so the one count N
    with float(N) / 1e9 == params_B, the nearest integer to params_B * 1e9, is
    ParamCount itself. Returns None for a name that is no preset."""
    global _paratune_models
    if _paratune_models is None:
        out = subprocess.check_output([PARATUNE, 'presets', 'models', '--format', 'json'])
        doc = json.loads(out, parse_float=decimal.Decimal)
        _paratune_models = {m['name']: m['params_B'] for m in doc['models']}
    if name not in _paratune_models:
        return None
    b = _paratune_models[name]
    n = int((decimal.Decimal(b) * 10**9).to_integral_value(decimal.ROUND_HALF_EVEN))
    if not (n < 2 * 10**15 and float(n) / 1e9 == float(b)):
        raise ValueError(f'params_B {b} of {name} is no count / 1e9')
    return n


def params_reason(cfg, mod, side, model_config):
    """(mismatch, params): mismatch None and params `params N` when torchtitan
    builds the parameters paratune counts (or `params: the user's model` for a
    file on the user's base_config), else mismatch says what differs."""
    user = sys.modules.get('my_model_config')
    if user is not None and getattr(mod, 'base_config', None) is getattr(user, 'base_config', 0):
        return None, "params: the user's model"
    name = side['job']['model']
    spec = cfg.model_spec
    got = torchtitan_params(cfg, model_config)
    want = paratune_params(name)
    flavour = f'{getattr(spec, "name", "?")} {getattr(spec, "flavor", "?")}'
    if want is None:
        return f'torchtitan {flavour} builds {got} parameters; paratune has no preset {name} to count', None
    if got != want:
        return (f'torchtitan {flavour} builds {got} parameters, paratune counts {want} for {name} '
                f'({got - want:+d})'), None
    return None, f'params {got}'


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
        mismatch, params = params_reason(cfg, mod, side, model)
        if mismatch:
            return 'REJECT', mismatch
        return 'ACCEPT', f'dp_replicate {pd.dp_replicate} dp_shard {pd.dp_shard} tp {pd.tp} cp {pd.cp} pp {pd.pp}' + \
            (f', layers per stage {got}' if got else '') + f', {params}'
    except BaseException as e:
        msg = ''.join(traceback.format_exception_only(type(e), e)).strip().splitlines()[-1]
        return 'REJECT', msg


def main():
    return check_folder('torchtitan', sys.argv[1], '.torchtitan.py', check)


if __name__ == '__main__':
    sys.exit(main())
