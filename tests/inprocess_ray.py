"""The part of Ray's API the Ray engine uses, run in this process: each task runs when it is
submitted (tests of the engine's driver without a cluster)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class _Ref:
    def __init__(self, value: Any) -> None:
        self.value = value


class _Remote:
    def __init__(self, function: Callable[..., Any], returns: int = 1) -> None:
        self.function = function
        self.returns = returns

    def options(self, num_returns: int = 1, **_: Any) -> _Remote:
        return _Remote(self.function, num_returns)

    def remote(self, *args: Any) -> Any:
        values = [a.value if isinstance(a, _Ref) else a for a in args]
        result = self.function(*values)
        if self.returns == 1:
            return _Ref(result)
        return [_Ref(v) for v in result]


class _Exceptions:
    class RayError(Exception):
        pass

    class RayTaskError(RayError):
        cause: BaseException | None = None


class InProcessRay:
    """`ray` for `logcorr.engine_ray`, without a cluster."""

    exceptions = _Exceptions

    def __init__(self, cpus: int = 2) -> None:
        self.cpus = cpus

    def is_initialized(self) -> bool:
        return True

    def cluster_resources(self) -> dict[str, float]:
        return {"CPU": float(self.cpus)}

    def remote(self, **_: Any) -> Callable[[Callable[..., Any]], _Remote]:
        return _Remote

    def put(self, value: Any) -> _Ref:
        return _Ref(value)

    def wait(self, refs: list[Any], num_returns: int = 1, timeout: float | None = None
             ) -> tuple[list[Any], list[Any]]:
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref: _Ref) -> Any:
        return ref.value

    def cancel(self, ref: Any, force: bool = False) -> None:
        pass

    def shutdown(self) -> None:
        pass
