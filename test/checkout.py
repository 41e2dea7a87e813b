# SPDX-License-Identifier: BSD-3-Clause
"""A copy of the package's source files, as a fresh clone has them plus the working tree's edits."""
import pathlib
import shutil
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[1]
# another sva_linearizer package's __init__.py: importing it writes its path to $DECOY_LOG and fails
DECOY = ("import os\nopen(os.environ['DECOY_LOG'], 'a').write(__file__ + '\\n')\n"
         "raise SystemExit('decoy package imported')\n")


def copy_checkout(dst: pathlib.Path) -> pathlib.Path:
    """The tracked and untracked-but-not-ignored files of the checkout (what is tested is the working
    tree, without venvs, build outputs or caches); outside a git checkout, a filtered copy."""
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, check=True, timeout=60).stdout
        names = [n for n in out.decode().split("\0") if n]
    except (OSError, subprocess.SubprocessError):
        names = None
    if not names:
        shutil.copytree(ROOT, dst, dirs_exist_ok=True, ignore=shutil.ignore_patterns(
            ".git", ".venv", ".ci-venv*", "build", "install", "log", "__pycache__", "*.egg-info"))
        return dst
    for n in names:
        if (ROOT / n).is_file():
            (dst / n).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / n, dst / n)
    return dst
