"""Feeds emitted AxoNN setup files to AxoNN's own code (axonn-ai/axonn @ 660a224).

For every NAME.axonn.py in the folder given (with NAME.sidecar.json beside
it), this reads the file's ax.init(...), ax.create_dataloader(...) and
optimize_communication(...) calls and its batch constants with `ast` (the file
is not run: it imports the user's model and data) and makes the same calls
into AxoNN, as rank 0 of the plan's world would:

- ax.init builds AxoNN's communication_handle, so its assertion that the G's
  multiply to the world size (communication.py:58-62) and its process-group
  layout run as written, over a torch.distributed that answers for job.gpus
  ranks without a network (a group is its list of ranks);
- ax.create_dataloader asserts the batch (axonn.py:97-99) and builds the real
  DistributedSampler and DataLoader (axonn.py:101-121) over a data set of one
  global batch: that batch must reach every rank as exactly
  GRADIENT_ACCUMULATION_STEPS micro-batches, none padded or dropped;
- optimize_communication is entered with the file's overlap options and an
  empty module for the user's model (intra_layer/overlap_communication.py:
  124-159 refuses all-gather overlap without the model);
- AxoNN's own is_parallelizable_linear (intra_layer/automatic_parallelism.py:
  15-21, the test patched_linear applies at :44 under auto_parallelize) is asked
  about every nn.Linear of the model's dense transformer block: fused QKV and
  separate q, k, v (GQA widths), o, MLP up (and gate), down, and the output
  layer (over the padded vocabulary where the file asks for one, which must
  be padding AxoNN needs). A linear AxoNN keeps sequential means the plan that
  runs is not the plan that was priced.

The G's, batch and micro-batch AxoNN ends up with must also be the sidecar's
plan. The model's shape comes from `paratune presets show MODEL` ($PARATUNE,
default build/cli/paratune of this checkout). Prints ACCEPT / REJECT per file
and a summary.

Usage: PYTHONPATH=scripts/fwcheck:<AxoNN checkout> python3 check_axonn.py DIR  (run.sh sets it up)
"""
import ast
import json
import re
import sys
import traceback

import stubs  # noqa: F401  (stand-ins for optional packages such as mpi4py; see stubs.py)
from verdicts import check_folder, preset

CALLS = ('init', 'create_dataloader', 'optimize_communication')



def read_emitted(text):
    """The file's module-level constants and its calls, by function name."""
    tree = ast.parse(text)
    consts, calls = {}, {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            consts[node.targets[0].id] = node.value.value
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            calls[f.attr if isinstance(f, ast.Attribute) else getattr(f, 'id', None)] = node
    return consts, calls


def arguments(call, names):
    """A call's arguments: literals as written, names looked up in `names`."""
    def value(node):
        return names[node.id] if isinstance(node, ast.Name) else ast.literal_eval(node)
    return [value(a) for a in call.args], {k.arg: value(k.value) for k in call.keywords}


def pretend_world(world):
    """torch.distributed and CUDA as rank 0 of `world` ranks sees them, with no
    network or GPU. With torch.distributed initialized, AxoNN's handle takes the
    rank and world from it (communication.py:54-56) and forms every group with
    new_group (:132, :144, :194, :206, :218)."""
    import torch
    dist = torch.distributed
    dist.is_initialized = lambda: True
    dist.get_rank = lambda group=None: 0
    dist.get_world_size = lambda group=None: world if group is None else len(group)
    dist.new_group = lambda ranks=None, **kw: tuple(ranks)
    torch.cuda.device_count = lambda: 1       # rank 0's local rank is 0 on any node (:71-75)
    torch.cuda.set_device = lambda device: None
    torch.cuda.synchronize = lambda device=None: None  # clear_handles, overlap_communication.py:27-30


def linears(m, vocab):
    """(name, in_features, out_features) of the nn.Linear layers of a dense
    Llama / GPT block as auto_parallelize meets them, and the output layer
    over a vocabulary of `vocab` rows, last."""
    h, f = m['hidden'], m['ffn_hidden']
    hd = m.get('head_dim') or h // m['heads']
    q, kv = m['heads'] * hd, m['kv_heads'] * hd
    out = [('qkv', h, q + 2 * kv), ('q', h, q), ('k', h, kv), ('v', h, kv), ('o', q, h), ('up', h, f)]
    if m.get('gated_ffn'):
        out.append(('gate', h, f))
    out.append(('down', f, h))
    out.append(('output', h, vocab))
    return out


def check(path):
    side = json.load(open(path[:-len('.axonn.py')] + '.sidecar.json'))
    job, plan = side['job'], side['config']
    world = job['gpus']
    text = open(path).read()
    step = 'reading the file'
    try:
        import torch
        from axonn import axonn as ax
        from axonn.intra_layer import automatic_parallelism, overlap_communication
        consts, calls = read_emitted(text)
        missing = [c for c in CALLS if c not in calls]
        if missing:
            return 'REJECT', 'no ' + ', '.join(f'{c}(...)' for c in missing) + ' call'
        pretend_world(world)

        # ax.init: communication.py:58-62 asserts the product is the world size.
        args, kw = arguments(calls['init'], consts)
        product = 1
        for g in ('G_inter', 'G_data', 'G_intra_r', 'G_intra_c', 'G_intra_d'):
            product *= kw.get(g, 1)
        step = f'ax.init (G product {product}, {world} GPUs)'
        # (AxoNN's assertion message leaves the counts out: its f-string at :62 is a separate statement.)
        ax.init(*args, **kw)
        c = ax.config
        G = (c.G_inter, c.G_data, c.G_intra_r, c.G_intra_c, c.G_intra_d)
        want = (plan['pp'], plan['dp'], plan.get('gy', plan.get('tp')), plan.get('gx', 1), plan['gz'])
        if G != want:
            return 'REJECT', f"AxoNN runs G {'x'.join(map(str, G))}, the plan is {'x'.join(map(str, want))}"

        # ax.create_dataloader over one global batch: axonn.py:97-99 asserts
        # GBS % (G_data * micro) == 0; the sampler deals it to G_data * G_intra_d
        # ranks (:101-106), padding it up to a multiple, and the loader cuts each
        # rank's share into micro-batches, dropping a remainder (:110-121).
        step = 'ax.create_dataloader'
        gbs = consts.get('GLOBAL_BATCH_SIZE')

        class OneGlobalBatch(torch.utils.data.Dataset):
            def __len__(self):
                return gbs

            def __getitem__(self, i):
                return i

        args, kw = arguments(calls['create_dataloader'], {**consts, 'dataset': OneGlobalBatch()})
        loader = ax.create_dataloader(*args, **kw)
        ranks = c.G_data * c.G_intra_d
        share, mbs, steps = len(loader.sampler), loader.batch_size, len(loader)
        if (c.global_batch_size, c.micro_batch_size) != (job['global_batch'], plan['mbs']):
            return 'REJECT', (f'AxoNN loads global batch {c.global_batch_size} in micro-batches of '
                              f"{c.micro_batch_size}, the plan has {job['global_batch']} of {plan['mbs']}")
        if share * ranks != gbs:
            return 'REJECT', f'the sampler pads global batch {gbs} over {ranks} ranks to {share * ranks}'
        if steps * mbs != share:
            return 'REJECT', f'the loader drops {share - steps * mbs} of the {share} sequences a rank gets'
        if steps != consts.get('GRADIENT_ACCUMULATION_STEPS'):
            return 'REJECT', (f'a global batch is {steps} micro-batches per rank, '
                              f"GRADIENT_ACCUMULATION_STEPS is {consts.get('GRADIENT_ACCUMULATION_STEPS')}")

        # optimize_communication with the file's options; `model` is the user's
        # model, here an empty module (it holds no AxoNN layer to all-gather).
        step = 'optimize_communication'
        args, kw = arguments(calls['optimize_communication'], {**consts, 'model': torch.nn.Module()})
        with overlap_communication.optimize_communication(*args, **kw):
            pass

        # auto_parallelize: AxoNN's own predicate, reading the G's ax.init set.
        step = 'auto_parallelize'
        m = preset(job['model'])
        # A file may ask for the vocabulary padded so the output layer splits
        # as priced; the padding must be what AxoNN needs, and needed.
        pad = re.search(r'output layer .* pad it to (\d+)', text)
        vocab = int(pad.group(1)) if pad else m['vocab']
        split = automatic_parallelism.is_parallelizable_linear
        layers = linears(m, vocab)
        kept = [f'{n} {i}->{o}' for n, i, o in layers if not split(i, o)]
        if kept:
            return 'REJECT', (f"auto_parallelize keeps {', '.join(kept)} sequential (G_intra_r "
                              f'{c.G_intra_r}, G_intra_c {c.G_intra_c}, G_intra_d {c.G_intra_d})')
        if pad and split(m['hidden'], m['vocab']):
            return 'REJECT', f"the file asks for the vocabulary padded to {vocab}, AxoNN splits {m['vocab']}"
        return 'ACCEPT', (f"G {'x'.join(map(str, G))} = {world}, batch {gbs} = {mbs} x {c.G_data} x "
                          f'{c.G_intra_d} x {steps}, {len(layers)} linears split'
                          + (f' (the output layer over the vocabulary padded to {vocab}, as the file says)'
                             if pad else ''))
    except BaseException as e:  # an assertion or ValueError is AxoNN refusing the setup
        msg = ''.join(traceback.format_exception_only(type(e), e)).strip().splitlines()[-1]
        return 'REJECT', f'{step}: {msg}'


def main():
    import axonn
    if getattr(axonn, '__file__', None) is None:  # stubs.py would answer for a missing AxoNN
        sys.exit('check_axonn: put the AxoNN checkout (axonn-ai/axonn @ 660a224) on PYTHONPATH')
    return check_folder('axonn', sys.argv[1], '.axonn.py', check)


if __name__ == '__main__':
    sys.exit(main())
