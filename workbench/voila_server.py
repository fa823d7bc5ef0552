"""Voila with a preheated-kernel pool that refills late but never makes a page wait for it.

Voila 0.5 (voila/voila_kernel_manager.py, ``fill_if_needed`` and ``get_rendered_notebook``)
refills its pool by appending a task that sleeps ``fill_delay`` seconds, then starts a kernel and
runs the notebook. The dashboard sets a long delay (``serve.POOL_FILL_DELAY_S``) so the refill
does not take the CPU from the browser drawing the page just served. But a page that arrives
meanwhile pops that task and awaits it, sitting out the rest of the delay before its kernel
even starts: four pages opened one after another by a class waited 15 s each (measured in
tests/test_dashboard.py::test_four_students_at_once). Here the delay ends as soon as a page
takes the pool's entry, so a second visitor waits only for a kernel start, as with Voila's
default delay.

    python -m workbench.voila_server NOTEBOOK [voila options]      (serve.voila_command)
"""
from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable

# The event that ends each refill task's delay early, keyed by the task (the pool's entry).
_WAKE: "weakref.WeakKeyDictionary[asyncio.Task, asyncio.Event]" = weakref.WeakKeyDictionary()


async def wait_before(delay: float, aw: Awaitable):
    """Voila's ``wait_before``: await ``aw`` after ``delay`` seconds, or as soon as a page
    takes this pool entry (``wake_pool_entry``)."""
    wake = asyncio.Event()
    task = asyncio.current_task()
    if task is not None:
        _WAKE[task] = wake
    try:
        await asyncio.wait_for(wake.wait(), delay)
    except asyncio.TimeoutError:
        pass
    return await aw


def wake_pool_entry(entry: asyncio.Future) -> bool:
    """End the delay of a pool entry made by ``wait_before``; False if it has none."""
    wake = _WAKE.get(entry)
    if wake is None:
        return False
    wake.set()
    return True


def prompt_kernel_manager_factory(*args, **kwargs) -> type:
    """Voila's ``voila_kernel_manager_factory``, whose pooled class wakes the entry a page is
    about to take."""
    cls = _voila_factory(*args, **kwargs)
    if not hasattr(cls, "get_rendered_notebook"):      # preheating off: a plain manager
        return cls

    class PromptPoolKernelManager(cls):
        async def get_rendered_notebook(self, notebook_name: str, *a, **kw):
            pool = self._pools.get(notebook_name) or []
            if pool:
                wake_pool_entry(pool[0])
            return await super().get_rendered_notebook(notebook_name, *a, **kw)

    return PromptPoolKernelManager


def _install() -> None:
    """Point Voila at the prompt pool: its app module imported the factory by name, so that
    name is replaced; ``fill_if_needed`` looks ``wait_before`` up in its module when it
    refills."""
    global _voila_factory
    import voila.app
    import voila.voila_kernel_manager as vkm

    if _voila_factory is not None:          # installed: a second time would wrap our own
        return
    _voila_factory = vkm.voila_kernel_manager_factory
    voila.app.voila_kernel_manager_factory = prompt_kernel_manager_factory
    vkm.wait_before = wait_before


_voila_factory = None        # Voila's own factory, set by _install


def main() -> None:
    """Run Voila's command line with the prompt pool."""
    import voila.app

    _install()
    voila.app.main()


if __name__ == "__main__":
    main()
