"""The worker profile's allocator setting for the worker threads of this process.

Worker processes that blockwise starts get ``MALLOC_TOP_PAD_=268435456`` in their environment
(docs/design/WORKERS.md, "The worker profile"): glibc keeps 256 MiB of freed memory at the top
of its heap, so a block's large numpy temporaries reuse the pages the last block used instead
of being mapped, zero-filled page by page and unmapped again every block. glibc reads that
variable only when a process starts, and daisy's block functions run in worker threads of the
user's own process, which started without it. So a multiprocessing run sets the same parameter
on this process once, through ``mallopt(M_TOP_PAD, 256 MiB)``; it covers every arena, the worker
threads' included (a thread's arena keeps up to its 64 MiB heap).

Set late, the top pad needs a second parameter. Setting any of glibc's thresholds turns off its
dynamic mmap threshold, which then stays at 128 KiB. From the start of a process (the
variable) that does not matter: the first heap extension already takes the pad, and arrays are
cut from the padded top. Set later, the heap's top (or a reused thread arena's) may be small, and
every array of 128 KiB or more that does not fit there is mapped afresh and unmapped at free:
measured on the real-work block in a reused thread arena, 94,000 faults for 32 blocks against
1,900 with no setting at all. So ``M_MMAP_THRESHOLD`` is set too, to 32 MiB, the highest value
glibc's dynamic threshold reaches by itself: such arrays grow the heap instead (by the pad
too), and stay there for the next block (about 660 faults: the same as the variable).

What the user chose wins, as for worker processes: nothing is done when ``MALLOC_TOP_PAD_`` is
in the environment or ``GLIBC_TUNABLES`` names a ``glibc.malloc`` tunable, and a user's
``MALLOC_MMAP_THRESHOLD_`` is kept (the pad alone is set). Only glibc has these parameters:
under musl, macOS or Windows nothing is done, quietly. The cost is the profile's: up to
256 MiB that blocks freed stays with the process between blocks.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from typing import Any, Callable, Mapping, Optional

__all__ = ["M_TOP_PAD", "M_MMAP_THRESHOLD", "TOP_PAD_BYTES", "MMAP_THRESHOLD_BYTES",
           "keep_allocator_warm"]

#: glibc's mallopt parameter numbers (malloc.h).
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3
#: The worker profile's MALLOC_TOP_PAD_ (lib/execute/worker_profile.ts).
TOP_PAD_BYTES = 256 * 1024 * 1024
#: glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit systems: where its dynamic threshold stops.
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024

_lock = threading.Lock()
_outcome: Optional[str] = None
_decided = False


def user_setting(environ: Mapping[str, str]) -> Optional[str]:
    """The user's own top-pad setting, as ``NAME=value``, or None."""
    pad = environ.get("MALLOC_TOP_PAD_")
    if pad is not None:
        return "MALLOC_TOP_PAD_=%s" % pad
    tunables = environ.get("GLIBC_TUNABLES", "")
    if re.search(r"glibc\.malloc\.", tunables):
        return "GLIBC_TUNABLES=%s" % tunables
    return None


def glibc_mallopt() -> Optional[Callable[[int, int], int]]:
    """glibc's ``mallopt`` of this process, or None (another libc, or no ctypes loader)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):
        version = None
    if not version or not version.startswith("glibc"):
        return None
    try:
        import ctypes  # here, not at import: blockwise.daisy's import stays light

        libc = ctypes.CDLL(None)  # the symbols this process already has: glibc's among them
        mallopt: Any = libc.mallopt
    except (ImportError, OSError, AttributeError):
        return None
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt


def keep_allocator_warm(environ: Optional[Mapping[str, str]] = None,
                        mallopt: Optional[Callable[[int, int], int]] = None) -> Optional[str]:
    """Give this process the worker profile's top pad, once: returns what was done (e.g.
    ``"mallopt(M_TOP_PAD, 268435456), mallopt(M_MMAP_THRESHOLD, 33554432)"``) or None when
    nothing was (the user set their own, another libc, or mallopt refused). Later calls
    return the first outcome and do nothing. `environ` and `mallopt` are for tests."""
    global _outcome, _decided
    with _lock:
        if _decided:
            return _outcome
        _decided = True
        env = os.environ if environ is None else environ
        if user_setting(env) is not None:
            return None
        if mallopt is None:
            mallopt = glibc_mallopt()
        if mallopt is None:
            return None
        done = []
        try:
            # The threshold first: from then on no array of this size is mapped apart.
            if env.get("MALLOC_MMAP_THRESHOLD_") is None:
                if mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1:
                    done.append("mallopt(M_MMAP_THRESHOLD, %d)" % MMAP_THRESHOLD_BYTES)
            if mallopt(M_TOP_PAD, TOP_PAD_BYTES) == 1:
                done.insert(0, "mallopt(M_TOP_PAD, %d)" % TOP_PAD_BYTES)
        except Exception:  # noqa: BLE001 - an allocator hint must never break a run
            pass
        _outcome = ", ".join(done) or None
        return _outcome


def _reset_for_tests() -> None:
    """Forget the first outcome (tests only: the allocator itself keeps its parameters)."""
    global _outcome, _decided
    with _lock:
        _outcome = None
        _decided = False
