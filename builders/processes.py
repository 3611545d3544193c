"""Other processes on this machine: whether one still runs (for cleaning up after dead runs)."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """True when process `pid` exists (also when it belongs to another user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
