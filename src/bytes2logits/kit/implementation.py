"""What a hidden suite's ``impl`` fixture holds: the names under test, whoever defines them.

:class:`Implementation` wraps a plain namespace (the package reference, or a live kernel's globals);
:class:`bytes2logits.kit.remote.RemoteImplementation` is its counterpart for a notebook running in a
sandboxed worker. Both raise :class:`MissingName` for a name the notebook does not define, which the
hidden suites report as a teaching message rather than a crash.
"""

from __future__ import annotations

__all__ = ["Implementation", "MissingName"]


class MissingName(AssertionError, AttributeError):
    """The implementation under test does not define a name the task needs."""


class Implementation:
    """Attribute access to the names under test, with a teaching error for a missing one."""

    def __init__(self, names: dict, origin: str):
        self._names = names
        self._origin = origin

    def __getattr__(self, name: str):
        if name.startswith("_") and name not in self._names:
            raise AttributeError(name)
        try:
            return self._names[name]
        except KeyError:
            raise MissingName(f"{self._origin} does not define `{name}`: run the cell that defines it "
                              "and keep the name the task gives") from None

    def __repr__(self) -> str:
        return f"<implementation from {self._origin}>"
