"""``Context``: what a worker needs to reach its run, passed as ``DAISY_CONTEXT``.

A worker-function task's ``process_function()`` runs in a thread of the caller. That thread has
its ``Context`` bound to it (``_bind_thread_context``) so that ``Client()`` in the thread finds
its own context even while other worker threads of the same process run; a subprocess the
function starts finds it in the ``DAISY_CONTEXT`` environment variable instead.

The environment form is daisy's ``key=value:key=value``. A ``%``, ``:`` (or ``=`` in a key) is
written as ``%25``, ``%3A`` (``%3D``) so that values such as ``host:port`` survive the round
trip; strings without ``%`` read exactly as daisy reads them.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any, Dict, Iterator, List, Optional, Tuple

__all__ = ["Context"]

ENV_VARIABLE = "DAISY_CONTEXT"

_thread = threading.local()
_ESCAPED = re.compile(r"%(25|3[aA]|3[dD])")
_UNESCAPE = {"25": "%", "3a": ":", "3A": ":", "3d": "=", "3D": "="}


def _escape(text: str, key: bool) -> str:
    text = text.replace("%", "%25").replace(":", "%3A")
    if key:
        text = text.replace("=", "%3D")
    return text


def _unescape(text: str) -> str:
    if "%" not in text:
        return text
    return _ESCAPED.sub(lambda m: _UNESCAPE[m.group(1)], text)


class Context:
    """A string-to-string mapping with a compact environment-variable form.

    ``Context(hostname="node1", port=4000)`` stores every key and value as ``str``;
    ``to_env()`` gives ``"hostname=node1:port=4000"`` and ``Context.from_env()`` reads it
    back in a worker.
    """

    ENV_VARIABLE = ENV_VARIABLE

    def __init__(self, **kwargs: Any) -> None:
        self._values: Dict[str, str] = {str(k): str(v) for k, v in kwargs.items()}

    def __getitem__(self, key: str) -> str:
        return self._values[key]

    def __setitem__(self, key: str, value: object) -> None:
        self._values[str(key)] = str(value)

    def __delitem__(self, key: str) -> None:
        del self._values[key]

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __len__(self) -> int:
        return len(self._values)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._values))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Context):
            return NotImplemented
        return self._values == other._values

    __hash__ = None  # type: ignore[assignment]

    def keys(self) -> List[str]:
        """The keys, in insertion order."""
        return list(self._values)

    def values(self) -> List[str]:
        """The values, in insertion order."""
        return list(self._values.values())

    def items(self) -> List[Tuple[str, str]]:
        """``(key, value)`` pairs, in insertion order."""
        return list(self._values.items())

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key``, or ``default`` when absent."""
        return self._values.get(key, default)

    def copy(self) -> "Context":
        """An independent copy."""
        other = Context()
        other._values = dict(self._values)
        return other

    def to_env(self) -> str:
        """The ``key=value:key=value`` form for the ``DAISY_CONTEXT`` environment variable."""
        return ":".join(
            "%s=%s" % (_escape(k, key=True), _escape(v, key=False)) for k, v in self._values.items()
        )

    @classmethod
    def _parse(cls, text: str, source: str) -> "Context":
        ctx = cls()
        for token in text.split(":"):
            if not token:
                continue
            key, sep, value = token.partition("=")
            if not sep:
                raise ValueError(
                    "%s holds the token %r without '=' in %r; it must be key=value pairs "
                    "joined by ':', as Context.to_env() writes them." % (source, token, text)
                )
            ctx._values[_unescape(key)] = _unescape(value)
        return ctx

    @staticmethod
    def from_env() -> "Context":
        """The current worker's context.

        The context bound to this thread by the run comes first (a worker function running in
        a thread of the run); otherwise the ``DAISY_CONTEXT`` environment variable (a process
        the worker function started). ``KeyError`` when there is neither.
        """
        bound = _bound_context()
        if bound is not None:
            return bound.copy()
        text = os.environ.get(ENV_VARIABLE)
        if text is None:
            raise KeyError(
                "%s not found: no worker context is bound to this thread and the environment "
                "variable %s is not set. It is set by daisy's run_blockwise for the "
                "process_function() of a worker-function task (and inherited by the processes "
                "it starts); call Client() from there, or pass Client(context=...)."
                % (ENV_VARIABLE, ENV_VARIABLE)
            )
        return Context._parse(text, "the environment variable %s" % ENV_VARIABLE)

    def __repr__(self) -> str:
        return self.to_env()


def _bound_context() -> Optional[Context]:
    stack = getattr(_thread, "stack", None)
    return stack[-1] if stack else None


def _bind_thread_context(context: Context) -> None:
    """Make ``context`` what ``Context.from_env()`` returns in the calling thread, until the
    matching ``_unbind_thread_context()`` (bindings nest)."""
    if not isinstance(context, Context):
        raise TypeError(
            "_bind_thread_context expects a Context; got %r (%s)."
            % (context, type(context).__name__)
        )
    stack = getattr(_thread, "stack", None)
    if stack is None:
        stack = _thread.stack = []
    stack.append(context)


def _unbind_thread_context() -> None:
    """Undo the calling thread's latest ``_bind_thread_context`` (no-op when none)."""
    stack = getattr(_thread, "stack", None)
    if stack:
        stack.pop()
