"""Feeds emitted Megatron-LM argument files to Megatron-LM's own parser.

For every NAME.megatron.sh in the folder given (with NAME.sidecar.json beside
it, as `paratune emit --sidecar` writes them), this runs Megatron-LM's
parse_args and validate_args with the file's arrays as the command line and
its `export` lines as the environment, builds the TransformerConfig
(core_transformer_config_from_args, whose __post_init__ holds the pipeline
layout rules) and asks get_num_layers_to_build for the layers of every
pipeline rank and virtual stage (for a --pipeline-model-parallel-layout string,
the parsed layout's own stage lists), which must equal the split the plan was
priced with (the sidecar's pipeline.chunk_layers). Prints one line per file:
ACCEPT or REJECT with the reason, and a summary.

Usage: python3 check_megatron.py DIR   (the Megatron-LM checkout on sys.path)
"""
import contextlib
import io
import json
import os
import shlex
import sys
import traceback

import stubs  # noqa: F401  (stand-ins for optional packages; see stubs.py)
from verdicts import check_folder


def read_emitted(path):
    env, argv, in_array = {}, [], False
    with open(path) as f:
        for line in f:
            line = line.rstrip('\n')
            if line.startswith('export '):
                k, v = line[len('export '):].split('=', 1)
                env[k] = v
            elif line.endswith('=(') and not line.startswith('#'):
                in_array = True
            elif line == ')':
                in_array = False
            elif in_array:
                argv.extend(shlex.split(line))
    return env, argv


def check(path):
    side = json.load(open(path[:-len('.megatron.sh')] + '.sidecar.json'))
    env, argv = read_emitted(path)
    world = side['job']['gpus']
    saved_env = dict(os.environ)
    try:
        os.environ.update(env)
        os.environ['WORLD_SIZE'] = str(world)
        os.environ['RANK'] = '0'
        sys.argv = ['pretrain_gpt.py'] + argv
        from megatron.training.arguments import parse_args, validate_args
        import megatron.core.utils as mcore_utils
        from packaging.version import Version
        # Megatron gates features on the PyTorch it runs with (the MoE a2a
        # overlap asserts torch >= 2.6, transformer_config.py:3003-3006); the
        # check's Debian PyTorch 1.13 stands for the 2.6 a launch would use.
        mcore_utils._torch_version = Version('2.6.0')
        from megatron.training.argument_utils import core_transformer_config_from_args
        from megatron.core.transformer.transformer_block import get_num_layers_to_build
        with contextlib.redirect_stdout(io.StringIO()):
            args = parse_args()
            validate_args(args)
            cfg = core_transformer_config_from_args(args)
        pp = args.pipeline_model_parallel_size
        vpp = args.virtual_pipeline_model_parallel_size or 1
        got = []
        layout = cfg.pipeline_model_parallel_layout
        for v in range(vpp):
            for r in range(pp):
                if layout is not None:
                    # A layout string: the decoder layers of Megatron's own
                    # parsed stage list (what its get_num_layers_to_build
                    # counts, pipeline_parallel_layer_layout.py:167-169, without
                    # the process groups it asks for the ranks).
                    from megatron.core.transformer.enums import LayerType
                    got.append(layout.layout[r][v].count(LayerType.decoder))
                else:
                    got.append(get_num_layers_to_build(cfg, vp_stage=v if vpp > 1 else None,
                                                       pp_rank=r))
        want = side.get('pipeline', {}).get('chunk_layers')
        if want is not None and got != want:
            return 'REJECT', f'Megatron builds layers per chunk {got}, the plan priced {want}'
        if args.data_parallel_size != side['config']['dp']:
            return 'REJECT', f"Megatron derives DP {args.data_parallel_size}, the plan has {side['config']['dp']}"
        conf = side['config']
        if 'ep' in conf:
            # The expert layout Megatron builds must be the plan's.
            got_moe = (args.expert_model_parallel_size, args.expert_tensor_parallel_size)
            if got_moe != (conf['ep'], conf.get('etp', 1)) or not args.num_experts:
                return 'REJECT', f"Megatron builds ep, etp {got_moe}, the plan has {conf['ep']}, {conf.get('etp', 1)}"
            return 'ACCEPT', (f'dp {args.data_parallel_size}, vpp {vpp}, layers per chunk {got}, '
                              f'{args.num_experts} experts, ep {got_moe[0]}, etp {got_moe[1]}')
        return 'ACCEPT', f'dp {args.data_parallel_size}, vpp {vpp}, layers per chunk {got}'
    except BaseException as e:  # an assertion or ValueError is Megatron refusing the arguments
        msg = ''.join(traceback.format_exception_only(type(e), e)).strip().splitlines()[-1]
        return 'REJECT', msg
    finally:
        os.environ.clear()
        os.environ.update(saved_env)


def main():
    return check_folder('megatron', sys.argv[1], '.megatron.sh', check)


if __name__ == '__main__':
    sys.exit(main())
