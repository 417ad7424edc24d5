"""Runs emitted Megatron-Bridge scripts through Megatron-Bridge's own config code.

For every NAME.megatron-bridge.py in the folder given (with NAME.sidecar.json
beside it), this imports the script, calls its paratune_config() (the recipe
and the plan's overrides) and hands the ConfigContainer to Bridge's
runtime_config_update (training/config.py:1992 @067f987): the mixed-precision
recipe and CommOverlapConfig applied to the model, optimizer and DDP configs,
then ConfigContainer.validate(), which finalizes the DDP and optimizer configs
and the model (Megatron-Core's TransformerConfig.__post_init__: the pipeline
layout, recompute, CUDA graph, MoE and overlap rules) and runs Bridge's own
checks. It then reads back what Bridge will run (data parallel size, the
parallel sizes, the overlaps, the dispatcher), which must be the plan's.
Prints ACCEPT, REJECT (with the reason) or NOT RUN per file, and a summary.

Recipes build their model from a Hugging Face config (AutoBridge), which this
machine cannot download: the check stands in a GPTModelProvider with the
planned model's architecture, from paratune's preset of it
(planner/presets/models/NAME.json); a multi-latent-attention model gets
Bridge's MLAModelProvider. A model without a preset is NOT RUN.

Usage: python3 check_bridge.py DIR   (with stubs.py, Megatron-LM 2a75ac1 and
Megatron-Bridge's src/ on sys.path; run.sh sets it up)
"""
import contextlib
import importlib.machinery
import importlib.util
import io
import json
import os
import sys
import traceback

import stubs  # noqa: F401  (stand-ins for optional packages; see stubs.py)
import torch
from verdicts import check_folder

# Stand-ins this older PyTorch and the stubs need for Bridge's imports:
# `@torch.no_grad` without parentheses (PyTorch >= 2.0), and
# `AutoConfig.register(..., exist_ok=True)` on a stubbed transformers class.
_no_grad = torch.no_grad


class _NoGrad(_no_grad):
    def __new__(cls, func=None):
        if callable(func):
            return _no_grad()(func)
        return super().__new__(cls)

    def __init__(self, func=None):
        super().__init__()


torch.no_grad = _NoGrad
stubs._Meta.register = lambda cls, *a, **k: None


class _Energon(stubs._Finder):
    """Megatron-Energon (a separate package in the megatron namespace, for
    multimodal data) as an empty stand-in like the other optional packages."""

    def find_spec(self, fullname, path, target=None):
        if fullname == 'megatron.energon' or fullname.startswith('megatron.energon.'):
            return super().find_spec(fullname, path, target) or \
                importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None


sys.meta_path.insert(0, _Energon())

HERE = os.path.dirname(os.path.abspath(__file__))
PRESETS = os.path.join(HERE, '..', '..', 'planner', 'presets', 'models')


def provider_of(model_name):
    """A GPTModelProvider (MLAModelProvider) with the architecture of paratune's preset."""
    import torch.nn.functional as F
    from megatron.bridge.models.gpt_provider import GPTModelProvider
    from megatron.bridge.models.mla_provider import MLAModelProvider
    m = json.load(open(os.path.join(PRESETS, model_name + '.json')))
    kw = dict(num_layers=m['layers'], hidden_size=m['hidden'], num_attention_heads=m['heads'],
              num_query_groups=m.get('kv_heads', m['heads']),
              ffn_hidden_size=m.get('ffn_hidden', 4 * m['hidden']), vocab_size=m['vocab'],
              normalization='RMSNorm' if m.get('norm') == 'rmsnorm' else 'LayerNorm',
              gated_linear_unit=bool(m.get('gated_ffn')),
              share_embeddings_and_output_weights=m.get('tied_embeddings', True),
              add_bias_linear=bool(m.get('linear_bias')), position_embedding_type='rope',
              bf16=True, params_dtype=torch.bfloat16)
    if m.get('gated_ffn'):
        kw['activation_func'] = F.silu
    if m.get('head_dim'):
        kw['kv_channels'] = m['head_dim']
    if m.get('experts'):
        kw.update(num_moe_experts=m['experts'], moe_router_topk=m['top_k'],
                  moe_ffn_hidden_size=m.get('moe_ffn_hidden'))
        if m.get('shared_ffn_hidden'):
            kw['moe_shared_expert_intermediate_size'] = m['shared_ffn_hidden']
        if m.get('first_dense_layers'):
            kw['moe_layer_freq'] = [0] * m['first_dense_layers'] + [1] * (m['layers'] - m['first_dense_layers'])
    if m.get('kv_lora_rank'):
        # Multi-latent attention: Bridge's MLA provider (models/mla_provider.py:28).
        kw.update(multi_latent_attention=True, q_lora_rank=m.get('q_lora_rank') or None,
                  kv_lora_rank=m['kv_lora_rank'], qk_head_dim=m['qk_nope_head_dim'],
                  qk_pos_emb_head_dim=m['qk_rope_head_dim'], v_head_dim=m['v_head_dim'])
        kw.pop('num_query_groups')
        return MLAModelProvider(**kw)
    return GPTModelProvider(**kw)


class _StandInBridge:
    def __init__(self, provider):
        self.provider = provider

    def get_model_config(self):
        return self.provider

    def to_megatron_provider(self, load_weights=False):
        return self.provider


def load_script(path):
    spec = importlib.util.spec_from_file_location('paratune_bridge', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def built(cfg):
    """What Bridge will run, after runtime_config_update."""
    m = cfg.model
    return {'dp': cfg.data_parallel_size, 'tp': m.tensor_model_parallel_size,
            'pp': m.pipeline_model_parallel_size, 'vpp': m.virtual_pipeline_model_parallel_size or 1,
            'cp': m.context_parallel_size, 'sp': bool(m.sequence_parallel),
            'ep': m.expert_model_parallel_size, 'tp_comm_overlap': bool(m.tp_comm_overlap),
            'moe_a2a_overlap': bool(m.overlap_moe_expert_parallel_comm),
            'dispatcher': m.moe_token_dispatcher_type, 'flex': m.moe_flex_dispatcher_backend,
            'dist_opt': bool(cfg.ddp.use_distributed_optimizer),
            'overlap_grad_reduce': bool(cfg.ddp.overlap_grad_reduce),
            'overlap_param_gather': bool(cfg.ddp.overlap_param_gather),
            'recompute': m.recompute_granularity or 'none', 'fp8': m.fp8, 'fp8_recipe': m.fp8_recipe}


def planned(conf, moe):
    tp = conf.get('tp', conf.get('gy'))
    want = {'dp': conf['dp'], 'tp': tp, 'pp': conf['pp'], 'vpp': conf['vpp'], 'cp': conf['cp'],
            'sp': bool(conf['sp']) and tp > 1, 'tp_comm_overlap': bool(conf.get('tp_comm_overlap')),
            # Megatron-FSDP (zero 2 and 3) runs with the distributed optimizer
            # (Megatron-LM arguments.py:1127-1135, version 1 forces it).
            'dist_opt': bool(conf['distributed_optimizer']) or conf['zero'] >= 1,
            'overlap_grad_reduce': bool(conf.get('overlap_grad_reduce')),
            'overlap_param_gather': bool(conf.get('overlap_param_gather')),
            'recompute': conf['recompute']}
    if moe:
        want['ep'] = conf.get('ep', 1)
        want['moe_a2a_overlap'] = bool(conf.get('moe_a2a_overlap'))
        d = conf.get('moe_dispatcher', 'alltoall')
        want['dispatcher'] = 'flex' if d in ('deepep', 'hybridep') else d
    return want


def check(path):
    side = json.load(open(path[:-len('.megatron-bridge.py')] + '.sidecar.json'))
    saved_env = dict(os.environ)
    try:
        os.environ.update({'WORLD_SIZE': str(side['job']['gpus']), 'RANK': '0', 'LOCAL_RANK': '0'})
        if not os.path.exists(os.path.join(PRESETS, side['job']['model'] + '.json')):
            return 'NOT RUN', 'no paratune preset to stand in for the recipe\'s Hugging Face config'
        provider = provider_of(side['job']['model'])
        import megatron.bridge
        import megatron.core.utils as mcore_utils
        from packaging.version import Version
        # Bridge and Megatron gate features on the PyTorch and Transformer
        # Engine they run with (the a2a overlap asserts torch >= 2.6,
        # comm_overlap.py:493); the check's PyTorch 1.13 and absent TE stand
        # for the versions a launch would use.
        mcore_utils._torch_version = Version('2.6.0')
        megatron.bridge.AutoBridge.from_hf_pretrained = staticmethod(lambda *a, **k: _StandInBridge(provider))
        from megatron.bridge.training.config import runtime_config_update
        with contextlib.redirect_stdout(io.StringIO()):
            module = load_script(path)
            cfg = module.paratune_config()
            runtime_config_update(cfg)
        got = built(cfg)
        want = planned(side['config'], 'ep' in side['config'] or provider.num_moe_experts)
        diff = {k: (got.get(k), v) for k, v in want.items() if got.get(k) != v}
        if diff:
            return 'REJECT', f'Bridge would run (got, planned) {diff}'
        return 'ACCEPT', ', '.join(f'{k} {got[k]}' for k in ('dp', 'tp', 'pp', 'vpp', 'cp', 'ep', 'recompute'))
    except BaseException as e:  # an assertion or ValueError is Bridge refusing the config
        msg = ''.join(traceback.format_exception_only(type(e), e)).strip().splitlines()[-1]
        return 'REJECT', msg
    finally:
        os.environ.clear()
        os.environ.update(saved_env)


def main():
    return check_folder('megatron-bridge', sys.argv[1], '.megatron-bridge.py', check,
                        kinds=('ACCEPT', 'REJECT', 'NOT RUN'))


if __name__ == '__main__':
    sys.exit(main())
