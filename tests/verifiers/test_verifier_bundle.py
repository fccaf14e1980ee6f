"""Verifier bundles: deterministic ZIPs of a scenario's verifiers, refused when unsafe, loaded in isolation."""

from __future__ import annotations

import io
import os
import shutil
import stat
import struct
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import pytest

from eval_pipelines.inputs.scenarios import ScenarioFiles
from eval_pipelines.verifiers.bundle import (
    BUNDLE_PACKAGE,
    BundleError,
    build_bundle,
    load_bundle,
    safe_extract,
    scenario_package_name,
)
from eval_pipelines.verifiers.loader import package_version, verifier_version
from eval_pipelines.verifiers.protocol import verify_task
from tests.verifiers.conftest import EMAIL_OPS, NOOP, REFERENCE, PackageFactory, Replays

PREFIX = f"{BUNDLE_PACKAGE}/scenarios/email_ops"


def _zip(*entries: tuple[str, bytes] | zipfile.ZipInfo, data: bytes = b"x = 1\n") -> bytes:
    buffer = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        warnings.simplefilter("ignore", UserWarning)  # zipfile warns about the duplicate names made on purpose
        for entry in entries:
            if isinstance(entry, zipfile.ZipInfo):
                archive.writestr(entry, data)
            else:
                archive.writestr(*entry)
    return buffer.getvalue()


def _symlink(name: str, target: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


# --- build ----------------------------------------------------------------------------------------------------


def test_bundle_layout_is_an_importable_tree_without_failed_or_cached_files(
    email_ops: ScenarioFiles, tmp_path: Path
) -> None:
    source = tmp_path / "verifiers"
    shutil.copytree(email_ops.verifiers_dir, source, ignore=shutil.ignore_patterns("__pycache__"))
    (source / "rejected.FAILED.py").write_text("def verify(a): return True\n")
    (source / "__pycache__").mkdir()
    (source / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (source / ".hidden.py").write_text("")

    names = zipfile.ZipFile(io.BytesIO(build_bundle(EMAIL_OPS, source))).namelist()

    assert names == sorted(names)
    assert f"{BUNDLE_PACKAGE}/__init__.py" in names and f"{BUNDLE_PACKAGE}/scenarios/__init__.py" in names
    assert f"{PREFIX}/__init__.py" in names and f"{PREFIX}/bundle.json" in names
    bundled = {n.removeprefix(f"{PREFIX}/verifiers/") for n in names if n.startswith(f"{PREFIX}/verifiers/")}
    assert bundled == {p.name for p in email_ops.verifiers_dir.glob("*.py")}
    assert scenario_package_name("9lives:1.0") == "_9lives"


def test_bundle_bytes_are_deterministic(email_ops: ScenarioFiles, tmp_path: Path) -> None:
    first = build_bundle(EMAIL_OPS, email_ops.verifiers_dir)
    copy = tmp_path / "verifiers"
    shutil.copytree(email_ops.verifiers_dir, copy, ignore=shutil.ignore_patterns("__pycache__"))
    for path in copy.iterdir():
        os.utime(path, (1_900_000_000, 1_900_000_000))
    assert build_bundle(EMAIL_OPS, copy) == first
    (copy / "inbox_cleanup.py").write_text((copy / "inbox_cleanup.py").read_text() + "\n# tightened\n")
    assert build_bundle(EMAIL_OPS, copy) != first
    info = zipfile.ZipFile(io.BytesIO(first)).infolist()[0]
    assert info.date_time == (1980, 1, 1, 0, 0, 0) and stat.S_IFMT(info.external_attr >> 16) == stat.S_IFREG


def test_bundle_imports_from_the_zip_itself_without_eval_pipelines(email_ops: ScenarioFiles, tmp_path: Path) -> None:
    """The zip root is the import root: put the archive on sys.path and import (`-S`: no site-packages)."""
    archive = tmp_path / "bundle.zip"
    archive.write_bytes(build_bundle(EMAIL_OPS, email_ops.verifiers_dir))
    code = (
        "import importlib, sys\n"
        f"sys.path.insert(0, {str(archive)!r})\n"
        f"m = importlib.import_module('{PREFIX.replace('/', '.')}.verifiers.projector_request')\n"
        "assert 'eval_pipelines' not in sys.modules\n"
        "print(m.verify({})[0])\n"
    )
    result = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


# --- load -----------------------------------------------------------------------------------------------------


def test_loaded_bundle_verifies_like_the_source_package(email_ops: ScenarioFiles, replays: Replays) -> None:
    with load_bundle(build_bundle(EMAIL_OPS, email_ops.verifiers_dir)) as bundle:
        assert bundle.ids() == [EMAIL_OPS]
        assert bundle.scenario(EMAIL_OPS).version == package_version(email_ops.verifiers_dir)
        for task in email_ops.tasks().values():
            passed = verify_task(bundle, task.verifiers, replays[(task.task_id, REFERENCE)])
            assert [o.success for o in passed] == [True] * len(task.verifiers), [o.message for o in passed]
            failed = verify_task(bundle, task.verifiers, replays[(task.task_id, NOOP)])
            assert not any(o.success for o in failed)
            # Same content, same version: bundle and folder scores are comparable row for row.
            assert [o.verifier_version for o in passed] == [
                verifier_version(email_ops.verifiers_dir, m) for m in task.verifiers
            ]
        root = bundle.root
        assert root.is_dir()
    assert not root.exists()


def test_two_bundles_with_the_same_package_names_stay_isolated(make_package: PackageFactory) -> None:
    bundles = []
    for value in ("one", "two"):
        folder = make_package(
            {
                "_shared": f"VALUE = {value!r}\n",
                "check": "from ._shared import VALUE\n\ndef verify(run_artifacts):\n    return True, VALUE\n",
            }
        )
        bundles.append(load_bundle(build_bundle("demo:1.0.0", folder)))
    first, second = bundles
    try:
        assert first.namespace != second.namespace
        assert first.get("check").verify({}) == (True, "one")  # type: ignore[misc]
        assert second.get("check").verify({}) == (True, "two")  # type: ignore[misc]
        assert first.get("check").verify({}) == (True, "one")  # type: ignore[misc]
        assert BUNDLE_PACKAGE not in sys.modules and not any(m.startswith(BUNDLE_PACKAGE + ".") for m in sys.modules)
        first_modules = first.modules()
        assert f"{first.namespace}.{BUNDLE_PACKAGE}.scenarios.demo.verifiers._shared" in first_modules
        assert not set(first_modules) & set(second.modules())
    finally:
        first.close()
    assert first.modules() == [] and second.get("check").verify({}) == (True, "two")  # type: ignore[misc]
    second.close()
    assert second.modules() == []


def test_loading_refuses_a_tree_without_a_verifier_package(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="no verifier package"):
        load_bundle(_zip(("pkg/readme.txt", b"hi")))
    with pytest.raises(BundleError, match="not a Python identifier"):
        load_bundle(_zip(("pkg/scenarios/bad-name/verifiers/__init__.py", b"")))
    with pytest.raises(BundleError, match="cannot read the bundle"):
        load_bundle(tmp_path / "missing.zip")


# --- refusals -------------------------------------------------------------------------------------------------


def _zip_with_lying_size(payload: bytes, declared: int) -> bytes:
    """A stored entry whose headers declare fewer bytes than it holds (a hand-edited archive)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("pkg/big.bin", payload)
    data = bytearray(buffer.getvalue())
    actual = struct.pack("<I", len(payload))
    # Uncompressed size sits at offset 22 of the local header and 24 of the central directory header.
    local = data.find(b"PK\x03\x04")
    central = data.find(b"PK\x01\x02")
    assert data[local + 22 : local + 26] == actual and data[central + 24 : central + 28] == actual
    data[local + 22 : local + 26] = struct.pack("<I", declared)
    data[central + 24 : central + 28] = struct.pack("<I", declared)
    return bytes(data)


@pytest.mark.parametrize(
    ("archive", "limits", "message"),
    [
        (_zip(("../evil.py", b"x")), {}, "'..' path components"),
        (_zip(("pkg/../../evil.py", b"x")), {}, "zip slip"),
        (_zip(("/tmp/evil.py", b"x")), {}, "absolute paths"),
        (_zip(("C:/evil.py", b"x")), {}, "absolute paths"),
        (_zip(("pkg\\..\\evil.py", b"x")), {}, "backslashes"),
        (_zip(_symlink("pkg/link.py", "/etc/passwd"), data=b"/etc/passwd"), {}, "symbolic links"),
        (_zip(("pkg/a.py", b"x"), ("pkg/a.py", b"y")), {}, "occurs twice"),
        (_zip(("pkg/zeros.bin", b"\0" * 2_000_000)), {"max_total_bytes": 1_000_000}, "oversized archive"),
        (_zip(*((f"pkg/m{i}.py", b"") for i in range(10))), {"max_files": 5}, "10 entries, over the limit of 5"),
        (b"PK\x03\x04 this is not really a zip", {}, "not a readable ZIP"),
        (_zip(("pkg/noise.bin", os.urandom(5000))), {"max_total_bytes": 1000}, "bytes, over the limit of 1000"),
        # zipfile stops at the declared size, so the CRC no longer matches: refused either way.
        (_zip_with_lying_size(b"A" * 50_000, 100), {}, "Bad CRC-32|more bytes than its header declares"),
    ],
    ids=[
        "zip-slip",
        "nested-zip-slip",
        "absolute",
        "drive-letter",
        "backslash",
        "symlink",
        "duplicate",
        "zip-bomb",
        "too-many-files",
        "not-a-zip",
        "archive-too-big",
        "lying-header",
    ],
)
def test_unsafe_archives_are_refused_and_nothing_is_left_behind(
    tmp_path: Path, archive: bytes, limits: dict[str, int], message: str
) -> None:
    dest = tmp_path / "out"
    with pytest.raises(BundleError, match=message):
        safe_extract(archive, dest, **limits)
    assert not (tmp_path / "evil.py").exists() and not Path("/tmp/evil.py").exists()
    assert not dest.exists() or list(dest.iterdir()) == []


def test_extraction_never_overwrites(tmp_path: Path) -> None:
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine")
    with pytest.raises(BundleError, match="missing or empty directory"):
        safe_extract(_zip(("keep.txt", b"theirs")), dest)
    assert (dest / "keep.txt").read_text() == "mine"
    written = safe_extract(_zip(("pkg/a.py", b"a = 1\n"), ("pkg/sub/", b"")), tmp_path / "fresh")
    assert written == [(tmp_path / "fresh" / "pkg" / "a.py").resolve()]
    assert (tmp_path / "fresh" / "pkg" / "sub").is_dir()
