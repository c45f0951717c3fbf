"""What an episode waits on, and the two ways of waiting for it.

An episode (heldout.episodes.episode, heldout.episodes.loop) is written once, as a generator
that yields each call it must wait for, a `Wait`, and is sent what the call returned, or has
the call's exception raised where it yielded. `wait_here` makes each call in place, on this
thread; heldout.episodes.engine awaits them on the process's event loop, a model call as a
coroutine where the agent has one and a blocking call on a pool of threads, so hundreds of
episodes are in flight with no thread of their own. Both send the episode the same values, so
its row is the same whichever waited.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from contextlib import closing
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Wait:
    """One call an episode waits on. `kind` says whose it is: the agent's (a model call, a
    session beginning or closing) or the sandbox's (a tool that runs a program, the judge).
    `coroutine`, when the agent has one, makes the same call without blocking a thread."""

    kind: Literal["agent", "sandbox"]
    call: Callable[[], Any]
    coroutine: Callable[[], Awaitable[Any]] | None = None

    @classmethod
    def method(cls, kind: Literal["agent", "sandbox"], owner: Any, name: str, *args: Any,
               **kwargs: Any) -> Wait:
        """`owner.name(*args, **kwargs)`, with `owner.name_async` as its coroutine if it has
        one."""
        coroutine = getattr(owner, f"{name}_async", None)
        return cls(kind, partial(getattr(owner, name), *args, **kwargs),
                   None if coroutine is None else partial(coroutine, *args, **kwargs))


Steps = Generator[Wait, Any, T]


def wait_here(steps: Steps[T]) -> T:
    """Run the episode's steps on this thread, making each call as it comes."""
    with closing(steps):  # abandoned (interrupted): the steps release what they hold
        done, value = _advance(steps, None, None)
        while not done:
            try:
                reply, failure = value.call(), None
            except Exception as error:  # noqa: BLE001 - the episode decides what failure means
                reply, failure = None, error
            done, value = _advance(steps, reply, failure)
        return value


async def wait_with(steps: Steps[T], answer: Callable[[Wait], Awaitable[Any]]) -> T:
    """Run the episode's steps on an event loop, awaiting `answer(wait)` for each call."""
    with closing(steps):  # abandoned (cancelled): the steps release what they hold
        done, value = _advance(steps, None, None)
        while not done:
            try:
                reply, failure = await answer(value), None
            except Exception as error:  # noqa: BLE001 - the episode decides what failure means
                reply, failure = None, error
            done, value = _advance(steps, reply, failure)
        return value


def _advance(steps: Steps[T], reply: Any, failure: BaseException | None) -> tuple[bool, Any]:
    """(False, the next Wait) or (True, what the steps returned)."""
    try:
        return False, steps.send(reply) if failure is None else steps.throw(failure)
    except StopIteration as finished:
        return True, finished.value
