from collections.abc import Callable
from typing import Any

class Router:
    """PriorityProducer.produce's common path in C (see _routing.c)."""

    def __init__(
        self,
        routes: dict[str, dict[int | None, str]],
        produce: Callable[..., None],
        fallback: Callable[..., None],
    ) -> None: ...
    __wrapped__: Callable[..., None]
    def __call__(self, topic: str, value: Any = ..., *args: Any, **kwargs: Any) -> None: ...
