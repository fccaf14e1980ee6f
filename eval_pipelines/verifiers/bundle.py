"""Verifier bundles: a scenario's verifier package as a ZIP that any machine can import.

Layout (the zip root is the import root)::

    collinear/__init__.py
    collinear/scenarios/__init__.py
    collinear/scenarios/<scenario>/__init__.py
    collinear/scenarios/<scenario>/bundle.json         {scenario_id, package_version, files: {name: sha256}}
    collinear/scenarios/<scenario>/verifiers/__init__.py
    collinear/scenarios/<scenario>/verifiers/<module>.py

the package path the hosted product's clients import (`collinear.scenarios.email_ops.verifiers.<module>`):
`<scenario>` is the family id made into a Python identifier (`email_ops:1.0.0` -> `email_ops`, `9lives` ->
`_9lives`); the manifest keeps the full id. SimLab asks for a bundle by that package name, which
`family_of_package` leads back to its family.

A bundle may come from anywhere (the hosted service, a colleague, a generated task), so extraction refuses
absolute paths, `..`, links and special files, duplicate names, too many entries and too many bytes (declared
or actual), and loading imports it under a fresh top-level name: two bundles that both call their package
`collinear` never meet in `sys.modules`. Bundle modules import each other relatively; an absolute import
of the bundle's own top-level name is not supported, because that name is exactly what isolation replaces.
Loading runs the bundle's `__init__` code in this process; run untrusted verifiers through
`eval_pipelines.verifiers.isolation`.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.util
import io
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import threading
import uuid
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import TracebackType

from eval_pipelines.schemas.hosted import VERIFIER_PACKAGE_ROOT, family_id, scenario_package
from eval_pipelines.verifiers.loader import FAILED_SUFFIX, LoadedVerifier, VerifierPackage, package_version

BUNDLE_PACKAGE = VERIFIER_PACKAGE_ROOT
MANIFEST_NAME = "bundle.json"
VERIFIERS_PACKAGE = "verifiers"
#: 1980-01-01, the earliest time a ZIP can hold: fixed so the same sources give the same bytes.
FIXED_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
_FILE_MODE = stat.S_IFREG | 0o644
_UNIX = 3

DEFAULT_MAX_BUNDLE_BYTES = 32 * 1024 * 1024
DEFAULT_MAX_BUNDLE_FILES = 2000
_COPY_CHUNK = 64 * 1024
_SKIPPED_DIRS = {"__pycache__"}
_SKIPPED_SUFFIXES = (".pyc", ".pyo")
_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:")

_IMPORT_LOCK = threading.Lock()


class BundleError(ValueError):
    """A bundle cannot be built, extracted or loaded; the message says which entry and why."""


def scenario_package_name(scenario_id: str) -> str:
    """The bundle's `<scenario>` folder: the family id as a Python identifier (see `schemas.hosted`)."""
    try:
        return scenario_package(scenario_id)
    except ValueError as exc:
        raise BundleError(str(exc)) from None


def family_of_package(package: str, scenario_ids: Iterable[str]) -> str | None:
    """The family id whose bundle is served as `package` (`_9lives` -> `9lives`, `my_env` -> `my-env`): SimLab
    asks for a bundle by the package name in a task's verifier path. None when no family, or more than one, is
    served under that name: guessing between two would grade a rollout with another scenario's verifiers."""
    families = {family_id(scenario_id) for scenario_id in scenario_ids}
    matches = [family for family in families if family != package and _package_or_none(family) == package]
    return matches[0] if len(matches) == 1 else None


def _package_or_none(scenario_id: str) -> str | None:
    try:
        return scenario_package(scenario_id)
    except ValueError:
        return None


# --- build ----------------------------------------------------------------------------------------------------


def _bundled_files(verifiers_dir: Path) -> list[tuple[str, bytes]]:
    files: list[tuple[str, bytes]] = []
    for root, dirs, names in os.walk(verifiers_dir, followlinks=False):
        base = Path(root)
        for name in list(dirs):
            if (base / name).is_symlink():
                raise BundleError(f"{base / name}: a bundle holds regular files only, not symlinks")
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS and not d.startswith("."))
        for name in sorted(names):
            path = base / name
            if name.startswith(".") or name.endswith(_SKIPPED_SUFFIXES) or f"{FAILED_SUFFIX}." in name:
                continue
            if path.is_symlink() or not path.is_file():
                raise BundleError(f"{path}: a bundle holds regular files only, not symlinks or special files")
            files.append((path.relative_to(verifiers_dir).as_posix(), path.read_bytes()))
    return sorted(files)


def _zip_entry(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=FIXED_ZIP_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.create_system = _UNIX
    info.external_attr = _FILE_MODE << 16
    return info


def build_bundle(scenario_id: str, verifiers_dir: Path) -> bytes:
    """The scenario's verifier package as ZIP bytes; the same sources always give the same bytes.

    Leaves out `*.FAILED.py` (verifiers that failed their quality gate), `__pycache__`, compiled and hidden files.
    """
    verifiers_dir = Path(verifiers_dir)
    if not (verifiers_dir / "__init__.py").is_file():
        raise BundleError(f"{verifiers_dir}: a verifier package needs an __init__.py")
    scenario = scenario_package_name(scenario_id)
    files = _bundled_files(verifiers_dir)
    prefix = f"{BUNDLE_PACKAGE}/scenarios/{scenario}"
    manifest = {
        "scenario_id": scenario_id,
        "package_version": package_version(verifiers_dir),
        "files": {name: hashlib.sha256(data).hexdigest() for name, data in files},
    }
    entries: list[tuple[str, bytes]] = [
        (f"{BUNDLE_PACKAGE}/__init__.py", b'"""Verifier bundle."""\n'),
        (f"{BUNDLE_PACKAGE}/scenarios/__init__.py", b""),
        (f"{prefix}/__init__.py", b""),
        (f"{prefix}/{MANIFEST_NAME}", json.dumps(manifest, indent=2, sort_keys=True).encode() + b"\n"),
        *((f"{prefix}/{VERIFIERS_PACKAGE}/{name}", data) for name, data in files),
    ]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in sorted(entries):
            archive.writestr(_zip_entry(name), data, compresslevel=9)
    return buffer.getvalue()


# --- extract --------------------------------------------------------------------------------------------------


def _checked_name(info: zipfile.ZipInfo) -> PurePosixPath:
    name = info.filename
    if not name or "\x00" in name:
        raise BundleError(f"refusing bundle entry {name!r}: empty name or NUL character")
    if "\\" in name:
        raise BundleError(f"refusing bundle entry {name!r}: backslashes are not allowed in entry names")
    if name.startswith("/") or _WINDOWS_DRIVE.match(name):
        raise BundleError(f"refusing bundle entry {name!r}: absolute paths are not allowed")
    path = PurePosixPath(name)
    parts = name.rstrip("/").split("/")
    if any(part == ".." for part in parts):
        raise BundleError(f"refusing bundle entry {name!r}: '..' path components are not allowed (zip slip)")
    if any(part in ("", ".") for part in parts):
        raise BundleError(f"refusing bundle entry {name!r}: empty or '.' path components are not allowed")
    mode = info.external_attr >> 16
    kind = stat.S_IFMT(mode)
    if kind == stat.S_IFLNK:
        raise BundleError(f"refusing bundle entry {name!r}: symbolic links are not allowed")
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        raise BundleError(f"refusing bundle entry {name!r}: only regular files and directories are allowed")
    return path


def _open_archive(zip_bytes: bytes, max_total_bytes: int) -> zipfile.ZipFile:
    if len(zip_bytes) > max_total_bytes:
        raise BundleError(f"bundle is {len(zip_bytes)} bytes, over the limit of {max_total_bytes} bytes")
    try:
        return zipfile.ZipFile(io.BytesIO(zip_bytes))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as exc:
        raise BundleError(f"bundle is not a readable ZIP archive: {exc}") from None


def _validate(archive: zipfile.ZipFile, max_total_bytes: int, max_files: int) -> list[tuple[zipfile.ZipInfo, str]]:
    infos = archive.infolist()
    if len(infos) > max_files:
        raise BundleError(f"bundle holds {len(infos)} entries, over the limit of {max_files}")
    declared = 0
    seen: set[str] = set()
    checked: list[tuple[zipfile.ZipInfo, str]] = []
    for info in infos:
        path = _checked_name(info)
        key = path.as_posix()
        if key in seen:
            raise BundleError(f"refusing bundle entry {info.filename!r}: the name occurs twice")
        seen.add(key)
        declared += info.file_size
        if declared > max_total_bytes:
            raise BundleError(
                f"bundle declares more than {max_total_bytes} bytes uncompressed (at entry {info.filename!r}); "
                "refusing an oversized archive"
            )
        checked.append((info, key))
    return checked


def _copy_entry(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path, budget: int, max_total_bytes: int
) -> int:
    written = 0
    # "xb": never overwrite, and never write through a link someone placed at the target.
    with archive.open(info) as source, open(target, "xb") as sink:
        while chunk := source.read(_COPY_CHUNK):
            written += len(chunk)
            if written > info.file_size:
                raise BundleError(f"bundle entry {info.filename!r} holds more bytes than its header declares")
            if written > budget:
                raise BundleError(f"bundle expands to more than {max_total_bytes} bytes; refusing an oversized archive")
            sink.write(chunk)
    return written


def safe_extract(
    zip_bytes: bytes,
    dest: Path,
    *,
    max_total_bytes: int = DEFAULT_MAX_BUNDLE_BYTES,
    max_files: int = DEFAULT_MAX_BUNDLE_FILES,
) -> list[Path]:
    """Extract a bundle into `dest` (missing or empty) and return the files written.

    Every entry is checked before anything is written; if extraction still fails (an entry that expands past
    its declared size, a corrupt stream), `dest` is emptied again. Raises BundleError naming the entry.
    """
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise BundleError(f"{dest}: extraction target must be a missing or empty directory")
    archive = _open_archive(zip_bytes, max_total_bytes)
    with archive:
        entries = _validate(archive, max_total_bytes, max_files)
        dest.mkdir(parents=True, exist_ok=True)
        root = dest.resolve()
        written: list[Path] = []
        remaining = max_total_bytes
        try:
            for info, key in entries:
                target = root.joinpath(*key.split("/"))
                if not target.resolve().is_relative_to(root):
                    raise BundleError(f"refusing bundle entry {info.filename!r}: it resolves outside the target")
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                remaining -= _copy_entry(archive, info, target, remaining, max_total_bytes)
                written.append(target)
        except BundleError:
            _empty(root)
            raise
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
            _empty(root)
            raise BundleError(f"bundle could not be extracted: {type(exc).__name__}: {exc}") from None
    return written


def _empty(directory: Path) -> None:
    for child in directory.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


# --- load -----------------------------------------------------------------------------------------------------


@dataclass
class BundleScenario:
    """One scenario's verifier package inside a loaded bundle."""

    scenario_id: str
    verifiers_dir: Path
    package: VerifierPackage

    @property
    def version(self) -> str:
        return package_version(self.verifiers_dir)


@dataclass
class LoadedBundle:
    """A bundle imported under its own top-level name; `get(module)` resolves verifiers like a VerifierPackage.

    Close it (or use it as a context manager) to drop its modules from `sys.modules` and, when the bundle
    extracted itself into a temporary directory, to delete that directory.
    """

    root: Path
    namespace: str
    version: str
    scenarios: dict[str, BundleScenario]
    _owns_root: bool = False
    _closed: bool = field(default=False, repr=False)

    def scenario(self, scenario_id: str | None = None) -> BundleScenario:
        if scenario_id is None:
            if len(self.scenarios) != 1:
                raise BundleError(f"the bundle holds {len(self.scenarios)} scenarios; name one of {self.ids()}")
            return next(iter(self.scenarios.values()))
        for key, item in self.scenarios.items():
            if scenario_id in (key, item.scenario_id) or scenario_package_name(scenario_id) == key:
                return item
        raise BundleError(f"the bundle holds no verifiers for scenario {scenario_id!r}; it holds {self.ids()}")

    def ids(self) -> list[str]:
        return sorted(item.scenario_id for item in self.scenarios.values())

    def get(self, module: str) -> LoadedVerifier:
        """The verifier `module` of the bundle's only scenario."""
        return self.scenario().package.get(module)

    def modules(self) -> list[str]:
        return [name for name in sys.modules if name == self.namespace or name.startswith(self.namespace + ".")]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with _IMPORT_LOCK:
            for name in self.modules():
                del sys.modules[name]
        importlib.invalidate_caches()
        if self._owns_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LoadedBundle:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _verifier_packages(root: Path) -> Iterator[tuple[tuple[str, ...], Path]]:
    for init in sorted(root.glob(f"*/scenarios/*/{VERIFIERS_PACKAGE}/__init__.py")):
        package_dir = init.parent
        yield package_dir.relative_to(root).parts, package_dir


def _scenario_id(package_dir: Path, fallback: str) -> str:
    manifest = package_dir.parent / MANIFEST_NAME
    with contextlib.suppress(OSError, ValueError, AttributeError):
        value = json.loads(manifest.read_text(encoding="utf-8")).get("scenario_id")
        if isinstance(value, str) and value:
            return value
    return fallback


def _register_namespace(namespace: str, root: Path) -> None:
    spec = importlib.machinery.ModuleSpec(namespace, None, is_package=True)
    spec.submodule_search_locations = [str(root)]
    module = importlib.util.module_from_spec(spec)
    module.__path__ = [str(root)]
    sys.modules[namespace] = module


def open_extracted_bundle(root: Path, *, content_hash: str | None = None, owns_root: bool = False) -> LoadedBundle:
    """Import an already extracted bundle tree (see `safe_extract`) under a fresh top-level name."""
    root = Path(root).resolve()
    found = list(_verifier_packages(root))
    if not found:
        raise BundleError(
            f"bundle holds no verifier package: expected <package>/scenarios/<scenario>/{VERIFIERS_PACKAGE}/__init__.py"
        )
    for parts, _ in found:
        bad = [p for p in parts if not p.isidentifier()]
        if bad:
            raise BundleError(f"bundle folder {bad[0]!r} is not a Python identifier, so it cannot be imported")
    version = (
        content_hash
        or hashlib.sha256(
            b"".join(
                p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() for p in sorted(root.rglob("*.py"))
            )
        ).hexdigest()[:16]
    )
    namespace = f"_ep_bundle_{version}_{uuid.uuid4().hex[:8]}"
    with _IMPORT_LOCK:
        _register_namespace(namespace, root)
    scenarios: dict[str, BundleScenario] = {}
    for parts, package_dir in found:
        key = parts[2]
        package = VerifierPackage(directory=package_dir, package_name=".".join((namespace, *parts)))
        scenarios[key] = BundleScenario(_scenario_id(package_dir, key), package_dir, package)
    return LoadedBundle(root=root, namespace=namespace, version=version, scenarios=scenarios, _owns_root=owns_root)


def load_bundle(
    source: bytes | str | Path,
    *,
    dest: Path | None = None,
    max_total_bytes: int = DEFAULT_MAX_BUNDLE_BYTES,
    max_files: int = DEFAULT_MAX_BUNDLE_FILES,
) -> LoadedBundle:
    """Extract a bundle (bytes or a .zip path) safely and import it under an isolated top-level name.

    Without `dest` it goes into a fresh temporary directory, removed again by `LoadedBundle.close()`.
    """
    if isinstance(source, bytes):
        data = source
    else:
        path = Path(source)
        try:
            size = path.stat().st_size
        except OSError as exc:
            raise BundleError(f"{path}: cannot read the bundle: {exc.strerror}") from None
        if size > max_total_bytes:
            raise BundleError(f"{path}: bundle is {size} bytes, over the limit of {max_total_bytes} bytes")
        data = path.read_bytes()
    owns = dest is None
    target = Path(tempfile.mkdtemp(prefix="ep-bundle-")) if dest is None else Path(dest)
    try:
        safe_extract(data, target, max_total_bytes=max_total_bytes, max_files=max_files)
        return open_extracted_bundle(target, content_hash=hashlib.sha256(data).hexdigest()[:16], owns_root=owns)
    except BaseException:
        if owns:
            shutil.rmtree(target, ignore_errors=True)
        raise


__all__ = [
    "BUNDLE_PACKAGE",
    "DEFAULT_MAX_BUNDLE_BYTES",
    "DEFAULT_MAX_BUNDLE_FILES",
    "BundleError",
    "BundleScenario",
    "LoadedBundle",
    "build_bundle",
    "load_bundle",
    "open_extracted_bundle",
    "safe_extract",
    "scenario_package_name",
]
