"""The driver both checks share: runs `check` on every file of a folder whose
name ends with `suffix`, prints ACCEPT or REJECT with the reason per file and
a summary, and returns the exit status (1 if any file is rejected).
"""
import os


def check_folder(label, folder, suffix, check):
    files = sorted(f for f in os.listdir(folder) if f.endswith(suffix))
    verdicts = {'ACCEPT': 0, 'REJECT': 0}
    for name in files:
        verdict, why = check(os.path.join(folder, name))
        verdicts[verdict] += 1
        print(f'{verdict} {name}: {why}', flush=True)
    print(f"{label}: {verdicts['ACCEPT']} accepted, {verdicts['REJECT']} rejected of {len(files)}")
    return 1 if verdicts['REJECT'] else 0
