"""The public SimLab sources at a pinned revision: the `simulationlab==0.2.0` source distribution from PyPI.

Its cookbook (task bundles, agents and adapters written by SimLab's authors) is material nobody here wrote; the
tests import, run and grade it as it is. The archive is fetched from the package registry (the only network CI
has), checked against its published sha256, and unpacked once into the machine's cache, shared by every test
process. Nothing of it is committed here.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from eval_pipelines.inputs.paths import cache_dir

SIMLAB_VERSION = "0.2.0"
#: sha256 of simulationlab-0.2.0.tar.gz as published on PyPI.
SIMLAB_SDIST_SHA256 = "389c1bb063c8045689cafbea64f98e1d2a979b9bd3eab7189461dbdad4b5c354"
_READY = ".unpacked"


def simlab_source_tree() -> Path:
    """The unpacked sdist's root (it holds `cookbook/`, `src/simlab/`, `output/`), fetched on first use."""
    root = cache_dir() / "sources" / f"simulationlab-{SIMLAB_VERSION}"
    tree = root / f"simulationlab-{SIMLAB_VERSION}"
    if (root / _READY).is_file():
        return tree
    root.mkdir(parents=True, exist_ok=True)
    with (root.parent / f".simulationlab-{SIMLAB_VERSION}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (root / _READY).is_file():
            return tree
        with tempfile.TemporaryDirectory() as download:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--quiet",
                    "--disable-pip-version-check",
                    "--no-deps",
                    "--no-binary",
                    ":all:",
                    "--ignore-requires-python",
                    "--dest",
                    download,
                    f"simulationlab=={SIMLAB_VERSION}",
                ],
                check=True,
            )
            archive = Path(download) / f"simulationlab-{SIMLAB_VERSION}.tar.gz"
            digest = hashlib.sha256(archive.read_bytes()).hexdigest()
            if digest != SIMLAB_SDIST_SHA256:
                raise RuntimeError(f"{archive.name}: sha256 {digest}, expected {SIMLAB_SDIST_SHA256}")
            shutil.rmtree(tree, ignore_errors=True)
            with tarfile.open(archive) as tar:
                tar.extractall(root, filter="data")
        (root / _READY).touch()
    return tree


def cookbook_dir() -> Path:
    return simlab_source_tree() / "cookbook"
