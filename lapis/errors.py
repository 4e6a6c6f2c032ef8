"""lapis's error family: every error a user can cause names the rule, the value and the fix.

    LapisError                 base of the family; `lapis` exits 2 (bad input) unless a subclass says otherwise
    ├── LayoutError            a layout, descriptor, tensor-map or bank rule is broken (lapis.layouts)
    │   └── EncodeRejected     cuTensorMapEncodeTiled would return CUDA_ERROR_INVALID_VALUE (lapis.layouts.tma)
    ├── NotModelled            the input is legal, but lapis does not model it (interleaved TMA placement, ...)
    ├── ScheduleError          a schedule, its shape, parameters, profile or cost inputs are invalid (lapis.pipeline_sim)
    └── CaptureError           a capture, manifest, index or stored result is missing, unreadable or inconsistent

Each is a ValueError, so code that catches ValueError catches them too. The CLI maps the family to exit codes in
one place (lapis.cli.main.EXIT_CODES).
"""


class LapisError(ValueError):
    """An input breaks a rule. The message always names the rule, the offending value and the fix, e.g.
    ``sm90 descriptor: start address 0x408 is not 16 B aligned: got 0x408 (PTX ISA 9.7.15.5.1.2.2); fix: align
    the tile to 16 B``."""

    def __init__(self, rule: str, value, fix: str, source: str = ""):
        self.rule, self.value, self.fix, self.source = rule, value, fix, source
        where = f" ({source})" if source else ""
        self.message = f"{rule}: got {value}{where}; fix: {fix}"
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
