"""Load a scenario's verifier package (`verifiers/` with `__init__.py`) under an isolated import name.

Each scenario's package gets its own top-level module name derived from its folder and content, so two
scenarios (or two versions of one) never share `sys.modules` entries.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from eval_pipelines.schemas.verifiers import VerifierNeeds
from eval_pipelines.verifiers.protocol import VerifyFn

_LOCK = threading.Lock()
FAILED_SUFFIX = ".FAILED"


def _sources(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.glob("*.py")) if FAILED_SUFFIX not in p.name}


def verifier_version(directory: Path, module: str) -> str:
    """Content hash of one verifier: its own source plus the package's shared files (`__init__`, `_*.py`)."""
    sources = _sources(directory)
    digest = hashlib.sha256()
    for name in sorted(sources):
        if name == f"{module}.py" or name.startswith("_"):
            digest.update(name.encode())
            digest.update(b"\0")
            digest.update(sources[name])
    return digest.hexdigest()[:16]


def package_version(directory: Path) -> str:
    """Content hash of every verifier in the package: changes whenever any verifier changes."""
    digest = hashlib.sha256()
    for name, source in _sources(directory).items():
        digest.update(name.encode())
        digest.update(b"\0")
        digest.update(source)
    return digest.hexdigest()[:16]


@dataclass
class LoadedVerifier:
    module: str
    version: str
    verify: VerifyFn | None
    needs: VerifierNeeds
    load_error: str | None = None


@dataclass
class VerifierPackage:
    directory: Path
    package_name: str
    _cache: dict[str, LoadedVerifier] = field(default_factory=dict)

    def get(self, module: str) -> LoadedVerifier:
        if module not in self._cache:
            self._cache[module] = self._load(module)
        return self._cache[module]

    def _load(self, module: str) -> LoadedVerifier:
        version = verifier_version(self.directory, module)
        try:
            with _LOCK:
                loaded: ModuleType = importlib.import_module(f"{self.package_name}.{module}")
        except Exception as exc:
            return LoadedVerifier(module, version, None, VerifierNeeds.STATE, f"{type(exc).__name__}: {exc}")
        verify = getattr(loaded, "verify", None)
        needs = VerifierNeeds(getattr(loaded, "NEEDS", VerifierNeeds.STATE.value))
        return LoadedVerifier(module, version, verify if callable(verify) else None, needs)


def load_verifier_package(directory: Path) -> VerifierPackage:
    """Import `directory/__init__.py` as a uniquely named package and return a lazy module loader."""
    directory = directory.resolve()
    init = directory / "__init__.py"
    if not init.is_file():
        raise FileNotFoundError(f"{init}: a verifier package needs an __init__.py")
    # The location is part of the name: two copies of one scenario (same folder name, same sources) in one process
    # must not share modules, or the second would import from the first copy's (possibly deleted) folder.
    where = hashlib.sha256(str(directory).encode()).hexdigest()[:8]
    name = f"_ep_verifiers_{directory.parent.name}_{package_version(directory)}_{where}".replace("-", "_").replace(
        ".", "_"
    )
    with _LOCK:
        if name not in sys.modules:
            spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(directory)])
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot load verifier package at {directory}")
            package = importlib.util.module_from_spec(spec)
            sys.modules[name] = package
            try:
                spec.loader.exec_module(package)
            except Exception:
                del sys.modules[name]
                raise
    return VerifierPackage(directory=directory, package_name=name)
