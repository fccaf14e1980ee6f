"""A host without namespaces, as tests play it."""

from __future__ import annotations

import stat
from pathlib import Path


def refusing_wrapper(directory: Path) -> Path:
    """A command wrapper that fails as a kernel without namespaces does, and runs everything else unchanged."""
    wrapper = directory / "no-namespaces"
    wrapper.write_text(
        '#!/bin/sh\ncase " $* " in *" --sandbox "*) echo "sandbox: unshare: Operation not permitted" >&2; exit 126;;'
        '\nesac\nexec "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper
