"""Prints the start table from the verdict lines the checks print.

Reads `ACCEPT|REJECT|NOT RUN NAME: why` lines (run.sh's log) and prints, per
search space and emitted format, how many of the files would start and the
reasons of the others, as a Markdown table. NAME is what
tests/frameworks/start_test.cc writes: REQUEST.FRAMEWORK.rankN.EXTENSION, the
framework being the search space that ranked the plan (fsdp plans are emitted
for torchtitan; Megatron-LM plans are also written as Megatron-Bridge scripts).

Usage: python3 table.py LOG
"""
import collections
import re
import sys

SPACES = ('megatron-deepspeed', 'megatron', 'deepspeed', 'fsdp', 'torchtitan', 'axonn')
FORMATS = (('.megatron-bridge.py', 'Megatron-Bridge'), ('.megatron-deepspeed.sh', 'Megatron-DeepSpeed'),
           ('.megatron.sh', 'Megatron-LM'), ('.ds_config.json', 'DeepSpeed'), ('.torchtitan.py', 'torchtitan'),
           ('.axonn.py', 'AxoNN'))
LINE = re.compile(r'^(ACCEPT|REJECT|NOT RUN) (\S+): ?(.*)$')


def row_of(name):
    fmt = next((label for ext, label in FORMATS if name.endswith(ext)), 'other')
    parts = name.split('.')
    space = next((p for p in parts[1:] if p in SPACES), None)
    return f'{fmt} (ranked in the {space} space)' if space else fmt


def main():
    started, total = collections.Counter(), collections.Counter()
    reasons = collections.defaultdict(collections.Counter)
    for line in open(sys.argv[1]):
        m = LINE.match(line.rstrip('\n'))
        if not m:
            continue
        verdict, name, why = m.groups()
        row = row_of(name)
        total[row] += 1
        if verdict == 'ACCEPT':
            started[row] += 1
        else:
            reasons[row][f'{verdict.lower()}: {why}'] += 1
    print('| framework | start | why the others would not |')
    print('|---|---|---|')
    for row in sorted(total):
        why = '; '.join(f'{n}× {r}' for r, n in reasons[row].most_common()) or '—'
        print(f'| {row} | {started[row]}/{total[row]} | {why} |')
    all_started, all_total = sum(started.values()), sum(total.values())
    print(f'| all | {all_started}/{all_total} | |')
    return 0 if all_started == all_total else 1


if __name__ == '__main__':
    sys.exit(main())
