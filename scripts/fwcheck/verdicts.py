"""The driver every check shares: runs `check` on every file of a folder whose
name ends with `suffix`, prints its verdict (ACCEPT, REJECT, or another a
check names, such as NOT RUN) with the reason per file and a summary, and
returns the exit status (1 if any file is rejected).
"""
import os


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
