#!/usr/bin/env python3
"""Checks that a unity build cannot change which function a call reaches.

Under a unity build (cmake/Unity.cmake) the sources of a library share one
translation unit. A file-local function (anonymous namespace or `static`)
then becomes visible to its neighbours: two with the same name and signature
fail to compile, which is harmless, but two with the same name and different
parameters become overloads, and a neighbour's call may silently pick the
better-matching one of another file (a `Refuse(const char*, ...)` taking the
calls meant for a `Refuse(const std::string&, ...)`).

For every unity translation unit CMake generated under BUILD_DIR
(`*/CMakeFiles/*.dir/Unity/unity_*.cxx`, each #including its sources), this
lists the functions every source defines (Universal Ctags) and fails when a
file-local function shares its name and enclosing namespace with a function
of another source of the same unit. Exit 0 when none, 1 with the list, 2 when
it cannot run (no unity units, no ctags).

usage: scripts/unity_names.py [BUILD_DIR]   (default: build)
"""
import collections
import glob
import json
import os
import re
import shutil
import subprocess
import sys


def unity_units(build_dir):
    """{unit path: [source paths]} from CMake's generated unity files."""
    units = {}
    for unit in sorted(glob.glob(os.path.join(build_dir, "**", "Unity", "unity_*.cxx"), recursive=True)):
        with open(unit, encoding="utf-8") as f:
            sources = re.findall(r'^#include "([^"]+)"', f.read(), flags=re.M)
        if len(sources) > 1:
            units[unit] = sources
    return units


def functions(ctags, sources):
    """(name, enclosing namespace, file-local, source) for each function defined."""
    out = subprocess.run(
        [ctags, "--output-format=json", "--languages=C++", "--c++-kinds=f", "--fields=+sZ", "-o", "-"]
        + sources,
        check=True, capture_output=True, text=True).stdout
    found = []
    for line in out.splitlines():
        tag = json.loads(line)
        if tag.get("_type") != "tag" or tag.get("scopeKind", "namespace") != "namespace":
            continue  # members of classes are reached through their class
        scope = tag.get("scope", "")
        local = "__anon" in scope or re.match(r"^\s*static\b", tag.get("pattern", "/^")[2:]) is not None
        # An anonymous namespace is transparent to lookup from its enclosing one.
        namespace = "::".join(p for p in scope.split("::") if not p.startswith("__anon"))
        found.append((tag["name"], namespace, local, tag["path"]))
    return found


def main():
    build_dir = sys.argv[1] if len(sys.argv) > 1 else "build"
    # Debian's universal-ctags installs ctags-universal; `ctags` may be another
    # implementation's alternative.
    ctags = shutil.which("ctags-universal") or shutil.which("ctags")
    if ctags is None or "Universal Ctags" not in subprocess.run(
            [ctags, "--version"], capture_output=True, text=True).stdout:
        print("unity_names: Universal Ctags is needed (Debian package universal-ctags)", file=sys.stderr)
        return 2
    units = unity_units(build_dir)
    if not units:
        print(f"unity_names: no unity translation units under {build_dir} "
              "(configure with -DPARATUNE_UNITY=ON)", file=sys.stderr)
        return 2
    clashes = []
    for unit, sources in units.items():
        by_name = collections.defaultdict(list)
        for name, namespace, local, path in functions(ctags, sources):
            by_name[(namespace, name)].append((local, path))
        for (namespace, name), defs in sorted(by_name.items()):
            files = {path for _, path in defs}
            if len(files) > 1 and any(local for local, _ in defs):
                clashes.append(f"{namespace}::{name} in " + ", ".join(sorted(files)))
    if clashes:
        print("unity_names: file-local functions that a unity build makes visible to another "
              "source of the same library (rename one):", file=sys.stderr)
        for c in clashes:
            print("  " + c, file=sys.stderr)
        return 1
    print(f"unity_names: {len(units)} unity translation units, no file-local name shared")
    return 0


if __name__ == "__main__":
    sys.exit(main())
