"""A package's names that load on first use (PEP 562): `__getattr__ = lazy_names(__name__, globals(), HOMES)`.

`HOMES` maps each name to the submodule that defines it. Importing the package, or one submodule of it, then
imports none of the others: a command that needs one exporter, one model client or one tool server does not pay
for all of them at start-up. A name, once loaded, is kept in the package's namespace, so the next use is a plain
attribute lookup."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, namespace: dict[str, Any], homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The package's module-level `__getattr__`: a name in `homes` is imported from `<package>.<home>`."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        namespace[name] = value
        return value

    return __getattr__
