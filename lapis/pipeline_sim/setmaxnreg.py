"""Per-warpgroup register budgets set with `setmaxnreg` (sm90a), and the register-file check.

PTX ISA "setmaxnreg": the new per-thread register count lies in 24..256 and is a multiple of 8; the
count applies to every thread of the warpgroup (128 threads) that executes it. Warp-specialized kernels lower
the producer's count (`.dec`) and raise the consumers' (`.inc`); the sum over all warpgroups must fit the SM's
register file (registers_per_sm 32-bit registers, 65536 on cc 9.0).

Derived splits when none is given (FlashAttention-3, flash_fwd_kernel_sm90.h, LoadRegisterRequirement /
MmaRegisterRequirement): 1 consumer WG 56/256, 2 consumer WGs 24/240, 3 consumer WGs
32/160. With 4 or more consumer WGs (no FA3 row) the producer keeps 24 and each consumer gets the rest of the
512 registers per thread-slot (65536 / 128) shared equally, rounded down to a multiple of 8, at most 256.
"""

from __future__ import annotations

from lapis.catalog.hardware import REGISTERS_PER_SM, WARPGROUP_THREADS  # noqa: F401 (re-exported)
from lapis.errors import ScheduleError

REG_MIN, REG_MAX, REG_STEP = 24, 256, 8
FA3_SPLITS = {1: (56, 256), 2: (24, 240), 3: (32, 160)}  # consumer WGs -> (producer, consumer) registers


def derived_split(consumer_wgs: int, registers_per_sm: int = REGISTERS_PER_SM) -> tuple[int, int]:
    """(producer, consumer) registers per thread when the schedule does not set them."""
    if consumer_wgs in FA3_SPLITS:
        return FA3_SPLITS[consumer_wgs]
    slots = registers_per_sm // WARPGROUP_THREADS
    return REG_MIN, min(REG_MAX, (slots - REG_MIN) // consumer_wgs // REG_STEP * REG_STEP)


def check_count(n: int, what: str) -> None:
    """A setmaxnreg operand: 24..256, a multiple of 8. Raises ScheduleError otherwise."""
    if not REG_MIN <= n <= REG_MAX or n % REG_STEP:
        raise ScheduleError(f"setmaxnreg takes {REG_MIN}..{REG_MAX} registers in steps of {REG_STEP} ({what})", n,
                            f"use a multiple of 8 in {REG_MIN}..{REG_MAX}", "PTX ISA setmaxnreg")


def register_split(consumer_wgs: int, regs_producer: int | None, regs_consumer: int | None,
                   registers_per_sm: int) -> dict:
    """The producer/consumer split, derived where not given, checked against the register file.

    Returns dict(regs_producer, regs_consumer, registers) with registers = 128 x (producer + wgs x consumer),
    in 32-bit registers. Raises ScheduleError for a count outside setmaxnreg's rule or a split over the file."""
    dp, dc = derived_split(consumer_wgs, registers_per_sm)
    prod = dp if regs_producer is None else regs_producer
    cons = dc if regs_consumer is None else regs_consumer
    check_count(prod, "regs_producer")
    check_count(cons, "regs_consumer")
    total = WARPGROUP_THREADS * (prod + consumer_wgs * cons)
    if total > registers_per_sm:
        raise ScheduleError("the register split does not fit the register file",
                            f"{WARPGROUP_THREADS} x ({prod} + {consumer_wgs} x {cons}) = {total} registers > "
                            f"{registers_per_sm}", f"lower regs_consumer to at most "
                            f"{(registers_per_sm // WARPGROUP_THREADS - prod) // consumer_wgs // 8 * 8}",
                            "PTX ISA setmaxnreg; registers_per_sm")
    return dict(regs_producer=prod, regs_consumer=cons, registers=total)
