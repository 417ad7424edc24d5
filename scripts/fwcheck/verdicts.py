"""What every check shares: the driver that runs `check` on every file of a
folder whose name ends with `suffix`, prints its verdict (ACCEPT, REJECT, or
another a check names, such as NOT RUN) with the reason per file and a
summary, and returns the exit status (1 if any file is rejected); and the
paratune binary the checks ask for a model's shape or count (PARATUNE,
default build/cli/paratune of this checkout).
"""
import functools
import json
import os
import subprocess

PARATUNE = os.environ.get('PARATUNE', os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   '..', '..', 'build', 'cli', 'paratune'))


def paratune_json(*args):
    """The JSON `paratune ARGS...` prints."""
    return json.loads(subprocess.check_output([PARATUNE, *args]))


@functools.lru_cache(maxsize=None)
def preset(name):
    """paratune's preset NAME as `paratune presets show NAME` prints it."""
    return paratune_json('presets', 'show', name)


def check_folder(label, folder, suffix, check, kinds=('ACCEPT', 'REJECT')):
    files = sorted(f for f in os.listdir(folder) if f.endswith(suffix))
    verdicts = {k: 0 for k in kinds}
    for name in files:
        verdict, why = check(os.path.join(folder, name))
        verdicts[verdict] += 1
        print(f'{verdict} {name}: {why}', flush=True)
    words = {'ACCEPT': 'accepted', 'REJECT': 'rejected'}
    counts = ', '.join(f"{verdicts[k]} {words.get(k, k.lower())}" for k in kinds)
    print(f"{label}: {counts} of {len(files)}")
    return 1 if verdicts['REJECT'] else 0
