"""The service's scenario catalog: re-scanned on every listing, re-read only where a folder changed.

`GET /scenarios` refreshes the catalog so that scenarios written since start-up show up. A plain refresh makes
every scenario anew, and the next listing or launch reads and checks all their tasks, seeds and NPCs again
(tens of milliseconds per listing, which a service answering many small runs pays on every poll). Here a
scenario whose folder is unchanged keeps its already-loaded files.
"""

from __future__ import annotations

import os
from pathlib import Path

from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioFiles

#: (path relative to the folder, inode, size, modification time) of every entry under a scenario folder.
Fingerprint = tuple[tuple[str, int, int, int], ...]


def folder_fingerprint(root: Path) -> Fingerprint:
    """What changes whenever a file under `root` is written, replaced (an atomic rename gives a new inode),
    added or removed."""
    entries: list[tuple[str, int, int, int]] = []
    for directory, subdirectories, files in os.walk(root):
        subdirectories.sort()
        for name in [*subdirectories, *sorted(files)]:
            path = os.path.join(directory, name)
            try:
                stat = os.stat(path, follow_symlinks=False)
            except OSError:  # removed meanwhile: the next refresh sees the folder as it is then
                continue
            entries.append((os.path.relpath(path, root), stat.st_ino, stat.st_size, stat.st_mtime_ns))
    return tuple(entries)


class ReusingScenarioCatalog(ScenarioCatalog):
    """A `ScenarioCatalog` whose `refresh()` keeps each unchanged scenario's loaded `ScenarioFiles`."""

    def refresh(self) -> None:
        previous: dict[str, ScenarioFiles] = getattr(self, "_by_id", {})
        fingerprints: dict[Path, Fingerprint] = getattr(self, "_fingerprints", {})
        super().refresh()
        current: dict[Path, Fingerprint] = {}
        for scenario_id, files in self._by_id.items():
            fingerprint = folder_fingerprint(files.root)
            current[files.root] = fingerprint
            kept = previous.get(scenario_id)
            if (
                kept is not None
                and kept.root == files.root
                and kept.benchmark == files.benchmark
                and fingerprints.get(files.root) == fingerprint
            ):
                self._by_id[scenario_id] = kept
        self._fingerprints = current
