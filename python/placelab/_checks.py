"""Argument checks shared by the plain-Python helpers (viz, tables): the same promise as the core's
functions, TypeError for a wrong kind of object and ValueError naming what is missing."""

from __future__ import annotations

import os

from . import _core


def simulator(obj, who):
    if not isinstance(obj, _core.Simulator):
        raise TypeError(f"{who}: simulator must be a placelab.Simulator, got {type(obj).__name__}")


def fields(obj, names, who, what):
    """obj must be a dict holding every key of `names` (a trace or result dict of the core)."""
    if not isinstance(obj, dict):
        raise TypeError(f"{who}: {what} must be a dict, got {type(obj).__name__}")
    missing = [k for k in names if k not in obj]
    if missing:
        raise ValueError(f"{who}: {what} lacks {', '.join(map(repr, missing))}; pass the dict the simulator returned")


def writable(path):
    """Like the core's writers: a file in a folder that does not exist is a ValueError, before any work.
    Anything that is not a path (a file object for savefig) is left to matplotlib."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        return
    name = os.fsdecode(path)
    if not os.path.isdir(os.path.dirname(name) or "."):
        raise ValueError(f"{name}: cannot be written (does its folder exist?)")
