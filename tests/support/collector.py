"""What the cyclic collector knows of an object, for the tests of freezing."""

from __future__ import annotations

import gc


def is_frozen(obj: object) -> bool:
    """Whether `obj` is out of the collector's scans: tracked, yet in none of its generations (frozen objects
    are in the permanent one, which `gc.get_objects()` leaves out). Counting frozen objects instead would not do:
    a frozen object that is freed leaves the count, and other threads free objects at any time."""
    assert gc.is_tracked(obj), "only containers the collector tracks can be frozen"
    return not any(tracked is obj for tracked in gc.get_objects())
