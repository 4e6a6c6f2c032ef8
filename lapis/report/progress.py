"""The report's progress display: one rich progress bar on stderr, a task per section, the validation's cases
counted. Off (every call a no-op) when disabled: `lapis report` disables it when stdout is not a terminal or
with --json."""

from __future__ import annotations

from contextlib import contextmanager


class Progress:
    """progress.section(name) wraps a step; progress.cases is validate_timelines' progress callable."""

    def __init__(self, enabled: bool):
        self._bar, self._task = None, None
        if enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as Bar
            self._bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            console=Console(stderr=True), transient=True)

    def __enter__(self) -> "Progress":
        if self._bar:
            self._bar.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._bar:
            self._bar.stop()

    @contextmanager
    def section(self, name: str):
        if self._bar:
            self._task = self._bar.add_task(f"report: {name}", total=None)
        try:
            yield self
        finally:
            if self._bar:
                self._bar.remove_task(self._task)
                self._task = None

    def cases(self, text: str, done: int | None = None, total: int | None = None) -> None:
        if self._bar and self._task is not None:
            self._bar.update(self._task, completed=done, total=total)

    @property
    def enabled(self) -> bool:
        return self._bar is not None
