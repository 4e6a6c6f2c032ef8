"""lapis's error family: every error a user can cause names the rule, the value and the fix.

    LapisError                 base of the family; `lapis` exits 2 (bad input) unless a subclass says otherwise
    ├── LayoutError            a layout, descriptor, tensor-map or bank rule is broken (lapis.layouts)
    │   └── EncodeRejected     cuTensorMapEncodeTiled would return CUDA_ERROR_INVALID_VALUE (lapis.layouts.tma)
    ├── NotModelled            the input is legal, but lapis does not model it (interleaved TMA placement, ...)
    ├── ScheduleError          a schedule, its shape, parameters, profile or cost inputs are invalid (lapis.pipeline_sim)
    └── CaptureError           a capture, manifest, index or stored result is missing, unreadable or inconsistent

Each is a ValueError, so code that catches ValueError catches them too. A message echoes at most SHOWN_CHARS
characters of the rule and of the value (FIX_CHARS of the fix), then "... (N chars)"; the attributes keep them
whole. The CLI maps the family to exit codes in
one place (lapis.cli.main.EXIT_CODES).
"""


SHOWN_CHARS = 400  # the most characters of a rule or value a message echoes (a user's value may be megabytes)
FIX_CHARS = 1000   # the fix lists choices (schedules, dtypes), so it may be longer


def shown(value, limit: int = SHOWN_CHARS) -> str:
    """str(value), cut to its first `limit` characters plus "... (N chars)" when longer, so an error message
    stays readable whatever the user passed."""
    text = str(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"


class LapisError(ValueError):
    """An input breaks a rule. The message always names the rule, the offending value and the fix, e.g.
    ``sm90 descriptor: start address 0x408 is not 16 B aligned: got 0x408 (PTX ISA 9.7.15.5.1.2.2); fix: align
    the tile to 16 B``."""

    def __init__(self, rule: str, value, fix: str, source: str = ""):
        self.rule, self.value, self.fix, self.source = rule, value, fix, source
        where = f" ({source})" if source else ""
        self.message = f"{shown(rule)}: got {shown(value)}{where}; fix: {shown(fix, FIX_CHARS)}"
        # args are the constructor's, so copies made from them (simpy re-raises process errors that way) work
        super().__init__(rule, value, fix, source)

    def __str__(self) -> str:
        return self.message


class LayoutError(LapisError):
    """An input violates a layout, descriptor, tensor-map or shared-memory bank rule."""


class NotModelled(LapisError):
    """The input is legal on the hardware, but lapis does not model it."""


class ScheduleError(LapisError):
    """A schedule cannot run as asked: unknown name, bad shape or parameter, missing profile or cost value."""


class CaptureError(LapisError):
    """A capture or other stored result is missing, unreadable or inconsistent with what reads it."""


def as_int(value, what: str, error: type[LapisError] = LayoutError) -> int:
    """An integer argument as a Python int: ints and numpy integers pass, anything else
    (floats, bools, None, strings) raises `error` naming `what`. Never truncates."""
    import numbers
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise error(f"{what} must be an integer", repr(value), f"pass a whole number for {what}")
    return int(value)
