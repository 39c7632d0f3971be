"""One task on a thread of its own: for system calls and C code that release the GIL (renames and
fsyncs, hnswlib's inserts) while the calling thread goes on with its Python work."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def in_thread(name: str, work: Callable[..., T], *args: Any) -> Future[T]:
    """Run `work(*args)` on a thread named `name` and return its future; the thread ends with
    that one task (`result()` joins it)."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
    future = pool.submit(work, *args)
    pool.shutdown(wait=False)
    return future
