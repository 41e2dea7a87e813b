# SPDX-License-Identifier: BSD-3-Clause
"""The README's install line as a newcomer runs it: a non-editable install into a fresh virtual
environment, with pip as Debian 12 ships it (23.0.1, no `wheel`: the oldest pip a ROS 2 user
meets builds wheels only for packages that declare their build system), then the commands from
a folder holding another copy of the package (a checkout's root). The first command answers at
once and compiles the kernels of the INSTALLED copy in the background; `compile --status` then
says warm for that copy and the next command says nothing about compiling. The other copy is
never imported.

Minutes: the core kernels compile from an empty cache (the installed copy's own __pycache__).
The new environment takes numpy, numba and the other runtime dependencies from this one's
site-packages (a path in a .pth file; this environment's own copy of sva_linearizer is not on
it), so that nothing but pip and the build requirements come from the package index."""
import os
import pathlib
import subprocess
import sys
import sysconfig
import time

import pytest

from checkout import DECOY, ROOT, copy_checkout
from sva_linearizer import _jit

STOCK_PIP = "pip==23.0.1"          # Debian 12's; Ubuntu 22.04 (ROS 2 Humble) ships 22.0.2
COMPILE_TIMEOUT_S = 1800


def _run(cmd, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{cmd}: exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def _background_compiles(marker):
    """pids of the processes whose command line names `marker` (the new environment's python)."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if marker.encode() in fh.read():
                    pids.append(int(entry))
        except (OSError, ValueError):
            continue
    return pids


@pytest.mark.skipif(not _jit.HAVE_NUMBA, reason="numba is not installed: nothing compiles")
@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs a git checkout of the package")
def test_install_as_a_newcomer(tmp_path):
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", venv])
    py = venv / "bin" / "python"
    _run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", STOCK_PIP], timeout=600)
    subprocess.run([py, "-m", "pip", "uninstall", "-y", "-q", "wheel"], capture_output=True)
    probe = subprocess.run([py, "-c", "import wheel"], capture_output=True)
    assert probe.returncode != 0, "the stock environment has no `wheel` package"
    src = copy_checkout(tmp_path / "src")
    _run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", src], timeout=900)
    for script in ("sva-linearizer", "linearizer_node"):
        assert (venv / "bin" / script).is_file(), f"pip installed no {script} console script"

    purelib = pathlib.Path(_run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).stdout.strip())
    installed = purelib / "sva_linearizer"
    assert (installed / "__init__.py").is_file()
    (purelib / "runtime_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")

    checkout = tmp_path / "checkout"            # the working directory holds another copy
    (checkout / "sva_linearizer").mkdir(parents=True)
    (checkout / "sva_linearizer" / "__init__.py").write_text(DECOY)
    log = tmp_path / "decoy.log"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SVA_LINEARIZER_", "NUMBA_", "PYTHON"))}
    env.update(DECOY_LOG=str(log))
    cli = venv / "bin" / "sva-linearizer"
    try:
        t0 = time.monotonic()
        first = _run([cli, "linearize", "--robot", "quadruped"], cwd=checkout, env=env, timeout=600)
        first_s = time.monotonic() - t0
        assert "A          36 x 36" in first.stdout, first.stdout
        assert "compile in the background" in first.stderr, first.stderr
        while True:
            status = subprocess.run([cli, "compile", "--status"], cwd=checkout, env=env, capture_output=True,
                                    text=True, timeout=300)
            assert str(installed) in status.stdout, status.stdout
            if status.stdout.startswith("core: warm") or time.monotonic() - t0 > COMPILE_TIMEOUT_S:
                break
            assert "core: failed" not in status.stdout, status.stdout
            time.sleep(5)
        compiled_s = time.monotonic() - t0
        assert status.stdout.startswith("core: warm"), (status.stdout, (installed / "__pycache__").exists())
        second = _run([cli, "linearize", "--robot", "quadruped"], cwd=checkout, env=env, timeout=600)
        assert second.stderr == "", second.stderr            # nothing about compiling
        assert "A          36 x 36" in second.stdout, second.stdout
        # the Fast DDS loopback profiles ship in the wheel, where loopback-env points
        lines = _run([cli, "loopback-env"], cwd=checkout, env=env).stdout.splitlines()
        profile = next(ln.split("=", 1)[1] for ln in lines if "_DEFAULT_PROFILES_FILE=" in ln)
        assert pathlib.Path(profile).parent == installed / "data" and pathlib.Path(profile).is_file(), lines
        assert (installed / "data" / "fastdds2_loopback.xml").is_file()
        print(f"first A, B after {first_s:.1f} s; core kernels compiled after {compiled_s:.0f} s")
    finally:
        for pid in _background_compiles(str(py)):
            try:
                os.kill(pid, 9)
            except OSError:
                pass
    assert not log.exists(), log.read_text()
