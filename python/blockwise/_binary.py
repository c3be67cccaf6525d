"""Where the ``blockwise`` executable is: the one the wheel installed, then ``BLOCKWISE_BINARY``,
then ``PATH``.

The wheel puts the binary in the environment's scripts folder (``<venv>/bin/blockwise``), next
to the interpreter, as ruff and uv ship theirs: that one is the package's own and always wins,
so a wheel never talks to a binary of another version by accident. ``BLOCKWISE_BINARY`` serves a
checkout without a wheel (``./blockwise``, or a script that runs ``bun main.ts "$@"``); it is run
as an executable, so a script needs its ``#!`` line and ``chmod +x``.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path
from typing import List

__all__ = ["BinaryNotFound", "find_binary"]

ENV_VARIABLE = "BLOCKWISE_BINARY"
_NAME = "blockwise.exe" if os.name == "nt" else "blockwise"


class BinaryNotFound(RuntimeError):
    """No ``blockwise`` executable to run; the message says where it looked and how to fix it."""


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(str(path), os.X_OK)


def _installed_candidates() -> List[Path]:
    """Where the wheel puts the binary: the scripts folder and the interpreter's own folder."""
    out: List[Path] = []
    try:
        scripts = sysconfig.get_path("scripts")
    except (KeyError, ValueError):  # pragma: no cover - an unusual installation scheme
        scripts = None
    if scripts:
        out.append(Path(scripts) / _NAME)
    if sys.executable:
        beside = Path(sys.executable).parent / _NAME
        if beside not in out:
            out.append(beside)
    return out


def find_binary() -> str:
    """The path of the ``blockwise`` executable to run; ``BinaryNotFound`` when there is none."""
    installed = _installed_candidates()
    for candidate in installed:
        if _executable(candidate):
            return str(candidate)
    configured = os.environ.get(ENV_VARIABLE, "")
    if configured != "":
        path = Path(configured).expanduser()
        if not path.exists():
            raise BinaryNotFound(
                "%s is set to %s, but nothing is there. Point it at the blockwise binary (e.g. "
                "./blockwise in a checkout after ./compile.sh) or at an executable script that "
                'runs `bun main.ts "$@"`, or unset it and install the blockwise wheel.'
                % (ENV_VARIABLE, configured)
            )
        if path.is_dir() or not os.access(str(path), os.X_OK):
            raise BinaryNotFound(
                "%s is set to %s, which is %s. Make it executable (chmod +x %s; a script needs a "
                "#! line) or point it at the blockwise binary."
                % (ENV_VARIABLE, configured, "a folder" if path.is_dir() else "not executable",
                   configured)
            )
        return str(path.resolve())
    found = shutil.which("blockwise")
    if found is not None:
        return found
    raise BinaryNotFound(
        "Cannot find the blockwise binary that runs blockwise.daisy: looked for %s (installed "
        "with the wheel), the environment variable %s (not set) and `blockwise` on PATH. "
        "Install the wheel (pip install blockwise-<version>-py3-none-<platform>.whl, which "
        "carries the binary), or set %s to the binary (e.g. ./blockwise after ./compile.sh) or "
        'to an executable script that runs `bun main.ts "$@"`.'
        % (" and ".join(str(p) for p in installed) or "the scripts folder", ENV_VARIABLE,
           ENV_VARIABLE)
    )
