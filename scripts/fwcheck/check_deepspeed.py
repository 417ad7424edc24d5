"""Feeds emitted DeepSpeed and Megatron-DeepSpeed files to their own start-up code.

DeepSpeed (deepspeedai/DeepSpeed @ edaa722), for every NAME.ds_config.json with
NAME.sidecar.json beside it (the Hugging Face flow: the user's script calls
deepspeed.initialize with the model and no mpu):
  - DeepSpeedConfig, which holds the batch, ZeRO and offload rules (pydantic
    models that forbid unknown keys), built as deepspeed.initialize builds it
    (__init__.py:213-214) on the plan's world size (config.py:719-724: the world
    over sequence_parallel_size when the config names one);
  - the engine's optimizer rule for ZeRO-Offload (engine.py:2040-2045): the
    optimizer must be DeepSpeed's CPU Adam, which the engine builds only from an
    Adam/AdamW `optimizer` block (engine.py:2097-2110); without one the user's
    own optimizer is refused while zero_force_ds_cpu_optimizer stays true;
  - Ulysses (sequence_parallel_size > 1): DeepSpeed's UlyssesSPAttentionHF is
    constructed with the model's heads, which raises where the heads or K/V
    heads do not divide over the SP ranks (ulysses_sp.py:145-150); the
    dataloader adapter refuses a sequence that does not divide (ulysses_sp.py:698);
  - AutoEP (expert_parallel): the engine's own validate_autoep_config and
    validate_autoep_post_detection (engine.py:577-641), the latter on the
    model's MoE layer as AutoEP would detect it; a plan that splits experts with
    no expert_parallel block would hold every expert on every GPU.

Megatron-DeepSpeed (deepspeedai/Megatron-DeepSpeed @ 4efb479), for every
NAME.megatron-deepspeed.sh: its own parse_args and validate_args on the
script's argument array, then the ds_config the script writes through
DeepSpeedConfig with Megatron-DeepSpeed's data-parallel size (what its mpu or
the PipelineModule's grid reports, training.py:606-623), and the rules
deepspeed.initialize applies to what Megatron-DeepSpeed hands it: the pipeline
engine refuses ZeRO-2/3 (pipe/engine.py:75-77); ZeRO-Offload needs the CPU Adam
that only --cpu-optimizer builds (optimizer/__init__.py:83-89, engine.py:2040-2045);
Ulysses cannot split grouped K/V heads (model/transformer.py:728-729) and needs
heads % sp == 0 (deepspeed/sequence/layer.py).

Both: the batch DeepSpeed derives must be the plan's (sidecar job.global_batch
and config.mbs). The model's shape comes from `paratune presets show MODEL`
(PARATUNE, default build/cli/paratune).

Usage: python3 check_deepspeed.py DIR  (DeepSpeed and Megatron-DeepSpeed on
sys.path; run from the DeepSpeed checkout so it reads its version.txt)
"""
import contextlib
import io
import json
import os
import sys
import traceback
import types

# Optional packages DeepSpeed probes with try/except ImportError: they must be
# absent, not stand-ins, or DeepSpeed takes the branch that uses them.
for _absent in ('triton', 'gmpy2', 'flint'):
    sys.modules[_absent] = None
os.environ.setdefault('DS_ACCELERATOR', 'cuda')

import stubs  # noqa: E402,F401  (stand-ins for optional packages; see stubs.py)
import torch._ops  # noqa: E402

# DeepSpeed 0.19 registers custom ops with PyTorch 2's torch.library; under the
# check's PyTorch 1.13 they are not registered, and looking one up by name
# (compile/passes/tp_compile.py:16) returns a stand-in instead of failing.
_op_lookup = torch._ops._OpNamespace.__getattr__


def _lenient_op(self, name):
    try:
        return _op_lookup(self, name)
    except AttributeError:
        return stubs._stub_class('torch.ops.' + name)


torch._ops._OpNamespace.__getattr__ = _lenient_op

from check_megatron import read_emitted  # noqa: E402
from verdicts import check_folder, preset  # noqa: E402

@contextlib.contextmanager
def world(size, rank=0):
    """deepspeed.comm answering as rank `rank` of `size` processes would."""
    import deepspeed.comm as dist
    saved = dist.get_world_size, dist.get_rank
    dist.get_world_size = lambda group=None: size
    dist.get_rank = lambda group=None: rank
    try:
        yield
    finally:
        dist.get_world_size, dist.get_rank = saved


def ds_config(config, world_size, dp_size=None):
    """DeepSpeedConfig as deepspeed.initialize builds it: with an mpu reporting
    dp_size (Megatron-DeepSpeed), or without one (the Hugging Face flow)."""
    from deepspeed.runtime.config import DeepSpeedConfig
    mpu = None
    if dp_size is not None:
        mpu = types.SimpleNamespace(get_data_parallel_world_size=lambda: dp_size)
    with world(world_size), contextlib.redirect_stdout(io.StringIO()):
        return DeepSpeedConfig(config, mpu)


def offload_optimizer_to_host(cfg):
    """engine.py:1232-1235 (zero_use_cpu_optimizer)."""
    from deepspeed.runtime.zero.offload_config import OffloadDeviceEnum
    off = cfg.zero_config.offload_optimizer
    return off is not None and off.device in (OffloadDeviceEnum.cpu, OffloadDeviceEnum.nvme)


def batch_gap(cfg, side, mbs):
    job, conf = side['job'], side['config']
    if cfg.train_batch_size != job['global_batch']:
        return f"DeepSpeed trains {cfg.train_batch_size} sequences per step, the plan {job['global_batch']}"
    if mbs != conf['mbs']:
        return f"micro-batch {mbs}, the plan {conf['mbs']}"
    return ''


def ulysses_gap(shape, sp, seq):
    """DeepSpeed's own head checks: UlyssesSPAttentionHF's constructor."""
    import importlib.metadata
    from deepspeed.runtime.sequence_parallel.ulysses_sp import UlyssesSPAttentionHF
    version = importlib.metadata.version
    # The constructor insists on transformers >= 4.51.3, which the user's
    # environment brings; the check has none installed.
    importlib.metadata.version = lambda p: '4.57.0' if p == 'transformers' else version(p)
    try:
        with world(sp):
            UlyssesSPAttentionHF(None, 1, shape['heads'], shape['hidden'] // shape['heads'],
                                 shape.get('kv_heads', shape['heads']), shape['layers'], None,
                                 local_seq_length=seq // sp, global_seq_length=seq)
    finally:
        importlib.metadata.version = version
    if seq % sp:
        return f"sequence {seq} does not divide over sp {sp} (ulysses_sp.py:698)"
    return ''


def autoep_gap(cfg, shape, world_size, sp, plan_ep):
    """The engine's AutoEP validation (engine.py:577-641) on the model's MoE layer."""
    ep = cfg.expert_parallel_config
    if not ep or not ep.enabled:
        return f"the plan splits experts over ep {plan_ep}, the config has no expert_parallel" if plan_ep > 1 else ''
    from deepspeed.module_inject.auto_ep_config import validate_autoep_config, validate_autoep_post_detection
    from deepspeed.module_inject.auto_ep_presets.base import MoELayerSpec
    import dataclasses
    with world(world_size):
        validate_autoep_config(ep, world_size, 1, cfg.tensor_parallel_config.autotp_size, sp)
    fields = {f.name for f in dataclasses.fields(MoELayerSpec)}
    layer = dict(moe_module_name='model.layers.0.mlp', model_family=ep.preset_model, router_name='gate',
                 experts_name='experts', expert_storage='module_list', expert_w1_name='w1',
                 expert_w2_name='w2', expert_w3_name='w3', num_experts=shape['experts'],
                 top_k=shape['top_k'], hidden_size=shape['hidden'],
                 ffn_hidden_size=shape.get('moe_ffn_hidden', shape['ffn_hidden']), score_func='softmax')
    spec = MoELayerSpec(**{k: v for k, v in layer.items() if k in fields},
                        **{f.name: None for f in dataclasses.fields(MoELayerSpec)
                           if f.name not in layer and f.default is dataclasses.MISSING
                           and f.default_factory is dataclasses.MISSING})
    validate_autoep_post_detection(ep, [spec])
    if ep.autoep_size != plan_ep:
        return f"AutoEP splits experts over {ep.autoep_size} ranks, the plan over {plan_ep}"
    return ''


def refusal(e):
    """The exception's message on one line (a pydantic error spans several)."""
    lines = ''.join(traceback.format_exception_only(type(e), e)).strip().splitlines()
    return ' '.join(line.strip() for line in lines if 'errors.pydantic.dev' not in line)[:400]


def check_hf(path):
    side = json.load(open(path[:-len('.ds_config.json')] + '.sidecar.json'))
    try:
        config = json.load(open(path))
        shape = preset(side['job']['model'])
        gpus = side['job']['gpus']
        cfg = ds_config(config, gpus)
        why = batch_gap(cfg, side, cfg.train_micro_batch_size_per_gpu)
        if not why and offload_optimizer_to_host(cfg) and cfg.zero_force_ds_cpu_optimizer:
            if (cfg.optimizer_name or '').lower() not in ('adam', 'adamw'):
                why = ('ZeRO-Offload with no Adam/AdamW optimizer block: the engine refuses any '
                       'optimizer but DeepSpeedCPUAdam (engine.py:2040-2045)')
        sp = int(config.get('sequence_parallel_size', 1))
        if not why and sp > 1:
            why = ulysses_gap(shape, sp, side['job']['seq_len'])
        if not why and shape.get('experts', 0) > 1:
            why = autoep_gap(cfg, shape, gpus, sp, side['config'].get('ep', 1))
        if why:
            return 'REJECT', why
        extra = f", AutoEP {cfg.expert_parallel_config.autoep_size}" if side['config'].get('ep', 1) > 1 else ''
        return 'ACCEPT', (f"batch {cfg.train_batch_size} = {cfg.train_micro_batch_size_per_gpu} x "
                          f"{cfg.gradient_accumulation_steps} x {gpus // sp}, ZeRO {cfg.zero_optimization_stage}"
                          f"{', CPU Adam' if offload_optimizer_to_host(cfg) else ''}{', sp ' + str(sp) if sp > 1 else ''}"
                          f"{extra}")
    except BaseException as e:  # DeepSpeed refusing the configuration
        return 'REJECT', refusal(e)


def heredoc(path, name):
    """The text the script writes to `name` with cat > name <<'EOF'."""
    lines, inside = [], False
    for line in open(path):
        if line.startswith(f"cat > {name} <<'EOF'"):
            inside = True
        elif inside and line.rstrip('\n') == 'EOF':
            return ''.join(lines)
        elif inside:
            lines.append(line)
    raise ValueError(f'{os.path.basename(path)} writes no {name}')


def check_mds(path):
    side = json.load(open(path[:-len('.megatron-deepspeed.sh')] + '.sidecar.json'))
    env, argv = read_emitted(path)
    gpus = side['job']['gpus']
    saved_env, saved_argv = dict(os.environ), sys.argv
    try:
        os.environ.update(env)
        os.environ.update(WORLD_SIZE=str(gpus), RANK='0', LOCAL_RANK='0')
        sys.argv = ['pretrain_gpt.py'] + argv
        from megatron.arguments import parse_args, validate_args
        from megatron.global_vars import set_args
        with contextlib.redirect_stdout(io.StringIO()):
            args = parse_args()
            validate_args(args)
        set_args(args)
        config = json.loads(heredoc(path, args.deepspeed_config))
        cfg = ds_config(config, gpus, args.data_parallel_size)
        why = batch_gap(cfg, side, args.micro_batch_size)
        if not why and args.global_batch_size != cfg.train_batch_size:
            why = f'Megatron-DeepSpeed steps {args.global_batch_size} sequences, DeepSpeed {cfg.train_batch_size}'
        pipelined = not args.no_pipeline_parallel
        if not why and pipelined and cfg.zero_optimization_stage >= 2:
            why = 'ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism (pipe/engine.py:75-77)'
        if not why and offload_optimizer_to_host(cfg) and cfg.zero_force_ds_cpu_optimizer:
            if not args.cpu_optimizer or args.cpu_torch_adam:
                why = ('ZeRO-Offload without --cpu-optimizer: Megatron-DeepSpeed hands DeepSpeed a GPU Adam '
                       '(optimizer/__init__.py:83-100), which the engine refuses (engine.py:2040-2045)')
        sp = args.ds_sequence_parallel_size
        if not why and sp > 1 and not args.ds_sequence_parallel_fpdt:
            kv = args.num_key_value_heads or args.num_attention_heads
            if kv != args.num_attention_heads:
                why = f'Ulysses with {kv} K/V heads of {args.num_attention_heads}: model/transformer.py:728-729 asserts equal'
            elif args.num_attention_heads % sp:
                why = f'{args.num_attention_heads} heads do not divide over sp {sp} (deepspeed/sequence/layer.py)'
        conf = side['config']
        if not why and args.data_parallel_size != conf['dp']:
            why = f"Megatron-DeepSpeed derives DP {args.data_parallel_size}, the plan has {conf['dp']}"
        if not why and (args.tensor_model_parallel_size, args.pipeline_model_parallel_size) != (conf['tp'], conf['pp']):
            why = (f'tp, pp {args.tensor_model_parallel_size}, {args.pipeline_model_parallel_size}; '
                   f"the plan {conf['tp']}, {conf['pp']}")
        if not why and conf.get('ep', 1) != (args.moe_expert_parallel_size if args.num_experts != [1] else 1):
            why = f"experts over ep {args.moe_expert_parallel_size}, the plan {conf.get('ep', 1)}"
        if why:
            return 'REJECT', why
        return 'ACCEPT', (f'dp {args.data_parallel_size}, batch {cfg.train_batch_size} = {args.micro_batch_size} x '
                          f'{cfg.gradient_accumulation_steps} x {args.data_parallel_size}, '
                          f"{'pipeline engine' if pipelined else 'no pipeline'}, ZeRO {cfg.zero_optimization_stage}"
                          f"{', CPU Adam' if args.cpu_optimizer else ''}{', sp ' + str(sp) if sp > 1 else ''}"
                          f"{', FPDT' if args.ds_sequence_parallel_fpdt else ''}")
    except BaseException as e:  # an assertion or ValueError is the framework refusing the arguments
        return 'REJECT', refusal(e)
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        sys.argv = saved_argv


def main():
    import deepspeed  # noqa: F401  (imported once, as the launch would)
    status = check_folder('deepspeed', sys.argv[1], '.ds_config.json', check_hf)
    status |= check_folder('megatron-deepspeed', sys.argv[1], '.megatron-deepspeed.sh', check_mds)
    return status


if __name__ == '__main__':
    sys.exit(main())
