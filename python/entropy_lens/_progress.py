"""One progress line, rewritten in place: in a Jupyter cell (which folds carriage returns) and on
a terminal alike."""

import sys
import time
from typing import Callable, Optional, Union

ProgressArg = Union[bool, None, Callable[[int, int, str], None]]


class Line:
    """Calls from the library as ``(done, total, status)``; prints ``\\r<status>``."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.start = time.monotonic()
        self.shown = False

    def __call__(self, done: int, total: int, status: str) -> None:
        if not status:
            rate = done / max(time.monotonic() - self.start, 1e-9)
            status = f"{self.label}: {done}/{total} ({rate:.1f}/s)"
        sys.stdout.write("\r" + status)
        sys.stdout.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            sys.stdout.write("\n")
            sys.stdout.flush()


def callback(
    progress: ProgressArg, label: str
) -> "tuple[Optional[Callable[[int, int, str], None]], Optional[Line]]":
    """The callable to hand the library for ``progress`` (True: a :class:`Line`)."""
    if progress is True:
        line = Line(label)
        return line, line
    if progress is None or progress is False:
        return None, None
    if callable(progress):
        return progress, None
    raise TypeError(
        f"progress must be True, False, None or a callable (done, total, status), got {progress!r}"
    )
