"""The one error type for inputs that break a hardware rule."""


class LayoutError(ValueError):
    """An input violates a layout, descriptor or tensor-map rule.

    The message always names the rule, the offending value and the fix, e.g.
    ``sm90 descriptor: start address 0x408 is not 16 B aligned (PTX ISA
    9.7.15.5.1.2.2); fix: align the tile to 16 B``.
    """

    def __init__(self, rule: str, value, fix: str, source: str = ""):
        self.rule, self.value, self.fix, self.source = rule, value, fix, source
        where = f" ({source})" if source else ""
        self.message = f"{rule}: got {value}{where}; fix: {fix}"
        # args are the constructor's, so copies made from them (simpy re-raises process errors that way) work
        super().__init__(rule, value, fix, source)

    def __str__(self) -> str:
        return self.message


def as_int(value, what: str) -> int:
    """An integer argument as a Python int: ints and numpy integers pass, anything else
    (floats, bools, None, strings) raises LayoutError naming `what`. Never truncates."""
    import numbers
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise LayoutError(f"{what} must be an integer", repr(value), f"pass a whole number for {what}")
    return int(value)
