"""daisy 1.x's ``Task``: the v2 ``Task`` plus ``num_workers=`` and ``upstream_tasks=``.

This is the ``Task`` of bare ``import daisy`` (``daisy.v1_compat``). Both keywords still work and
warn (``DeprecationWarning``) with the v2 spelling: ``max_workers=``, and pipelines composed
with ``+`` instead of ``upstream_tasks=``. The upstream tasks are recorded on the task and
become pipeline edges when ``run_blockwise([...])`` (or ``Scheduler([...])``) gets the tasks.
"""

from __future__ import annotations

import warnings
from typing import Any, Iterable, Optional, Union

from ._task import Task as _V2Task
from ._task import _record_task_upstream

__all__ = ["Task"]


class Task(_V2Task):
    """daisy 1.x-compatible ``Task``: accepts ``num_workers=N`` (alias of ``max_workers``)
    and ``upstream_tasks=[task, ...]`` (block-level dependencies), each with a
    ``DeprecationWarning``. Everything else is the v2 ``Task``."""

    def __init__(
        self,
        *args: Any,
        num_workers: Optional[int] = None,
        upstream_tasks: Union[Iterable[_V2Task], _V2Task, None] = None,
        **kwargs: Any,
    ) -> None:
        task_id = args[0] if args else kwargs.get("task_id", "?")
        if num_workers is not None:
            if "max_workers" in kwargs or len(args) > 8:
                raise TypeError(
                    "Task %r: pass either max_workers (v2) or num_workers (v1.x), not both."
                    % (task_id,)
                )
            warnings.warn(
                "Task(num_workers=N) is the daisy 1.x spelling; daisy v2 uses max_workers=N "
                "(import daisy.v2 as daisy for the v2 API).",
                DeprecationWarning,
                stacklevel=2,
            )
            kwargs["max_workers"] = num_workers
        upstream = _upstream_list(task_id, upstream_tasks)
        if upstream:
            warnings.warn(
                "Task(upstream_tasks=[...]) is the daisy 1.x way to declare dependencies; "
                "daisy v2 composes pipelines instead: upstream_task + downstream_task.",
                DeprecationWarning,
                stacklevel=2,
            )
        super().__init__(*args, **kwargs)
        _record_task_upstream(self, upstream)

    @property
    def upstream_tasks(self) -> list:
        """The daisy 1.x upstream tasks given at construction (a fresh list)."""
        return list(self.__dict__.get("_v1_upstream_tasks", ()))


def _upstream_list(task_id: Any, upstream: Any) -> list:
    if upstream is None:
        return []
    if isinstance(upstream, _V2Task):
        return [upstream]
    try:
        items = list(upstream)
    except TypeError:
        raise TypeError(
            "Task %r: upstream_tasks must be a list of Task objects; got %r (%s)."
            % (task_id, upstream, type(upstream).__name__)
        ) from None
    for item in items:
        if not isinstance(item, _V2Task):
            raise TypeError(
                "Task %r: upstream_tasks must contain Task objects; got %r (%s)."
                % (task_id, item, type(item).__name__)
            )
    return items
