"""Resident CTAs per SM by the CUDA occupancy rules (compute capability 9.0).

A CTA stays resident while the SM has room for all of it; the count per SM is the least of four limits:
  blocks     max resident blocks per SM: 32
  threads    max resident threads per SM: 2048 (64 warps); a CTA counts whole warps (threads rounded up to 32)
  registers  registers_per_sm (65536) 32-bit registers, allocated per warp in units of 256 (registers per thread
             rounded up to a multiple of 8), in each of the 4 SM sub-partitions (16384 each): warps per
             sub-partition = 16384 // registers per warp, x 4 per SM, // warps per CTA; max 255 per thread
  smem       smem_bytes_per_sm (233472 B = 228 KB at the largest carveout), each CTA taking its static +
             dynamic shared memory plus 1 KB reserved by the system, rounded up to 128 B; at most
             smem_bytes_per_block (232448 B = 227 KB) + the reserved 1 KB per CTA
Sources: CUDA C++ Programming Guide, "Compute Capabilities", Table "Technical Specifications per Compute
Capability" (cc 9.0: 32 blocks, 2048 threads, 64K registers, 255 registers per thread, 228 KB shared memory per
SM, 227 KB per block) and the shared-memory section for cc 9.0 (1 KB reserved per block); the occupancy
calculator's rules as the CUDA toolkit's cuda_occupancy.h implements them (cudaOccMaxBlocksPerSMRegsLimit: 256-
register warp allocation, 4 sub-partitions; cudaOccMaxBlocksPerSMSmemLimit: 128 B shared-memory granularity,
reservedSharedMemPerBlock added per CTA). The SM-wide register and shared-memory sizes come from the profile
(registers_per_sm, smem_bytes_per_sm, smem_bytes_per_block); the per-architecture constants below are cc 9.0's.
Not modelled: a carveout below the largest (cudaFuncAttributePreferredSharedMemoryCarveout), partitioned global
caching, clusters.
"""

from __future__ import annotations

from dataclasses import dataclass

from lapis.errors import ScheduleError

__all__ = ["Occupancy", "resident_ctas", "LIMITERS"]

WARP = 32
MAX_BLOCKS_PER_SM = 32
MAX_THREADS_PER_SM = 2048
MAX_THREADS_PER_BLOCK = 1024
MAX_REGS_PER_THREAD = 255
REG_ALLOC_UNIT = 256  # registers per warp are allocated in units of 256 (8 per thread)
SUB_PARTITIONS = 4
SMEM_ALLOC_UNIT = 128  # bytes
SMEM_RESERVED_PER_BLOCK = 1024  # bytes the system reserves per CTA (cc 8.x/9.0)
LIMITERS = ("blocks", "threads", "registers", "smem")  # the order ties are reported in
SOURCE = "CUDA C++ Programming Guide, Compute Capabilities (cc 9.0); cuda_occupancy.h"


@dataclass(frozen=True)
class Occupancy:
    """ctas_per_sm: resident CTAs per SM; limiter: the resource that sets it (the first of LIMITERS when several
    give the same count); limits: CTAs per SM each resource allows; registers_per_cta and smem_per_cta: what
    one CTA is allocated (32-bit registers, bytes including the reserved 1 KB)."""

    ctas_per_sm: int
    limiter: str
    limits: dict
    registers_per_cta: int
    smem_per_cta: int


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def _check(threads: int, regs_per_thread: int, smem_bytes: int, p) -> None:
    if not 1 <= threads <= MAX_THREADS_PER_BLOCK:
        raise ScheduleError(f"a CTA has 1..{MAX_THREADS_PER_BLOCK} threads", threads, "change the block size", SOURCE)
    if not 1 <= regs_per_thread <= MAX_REGS_PER_THREAD:
        raise ScheduleError(f"a thread has 1..{MAX_REGS_PER_THREAD} registers", regs_per_thread,
                            "lower the register count (__launch_bounds__, -maxrregcount)", SOURCE)
    if not 0 <= smem_bytes <= p["smem_bytes_per_block"]:
        raise ScheduleError("a CTA's shared memory fits smem_bytes_per_block", f"{smem_bytes} B > "
                            f"{p['smem_bytes_per_block']} B", "use less shared memory per CTA", SOURCE)


def resident_ctas(p, threads: int, regs_per_thread: int, smem_bytes: int) -> Occupancy:
    """CTAs of `threads` threads, `regs_per_thread` registers each (the launch count: ptxas's, or the mean of a
    setmaxnreg split) and `smem_bytes` bytes of shared memory (static + dynamic, without the reserved 1 KB)
    that one SM keeps resident. p: a profile with registers_per_sm, smem_bytes_per_sm, smem_bytes_per_block.
    Raises ScheduleError for a CTA that cannot launch (threads, registers per thread or per CTA, shared memory)."""
    _check(threads, regs_per_thread, smem_bytes, p)
    warps = -(-threads // WARP)
    regs_per_warp = _round_up(regs_per_thread * WARP, REG_ALLOC_UNIT)
    if regs_per_warp * _round_up(warps, SUB_PARTITIONS) > p["registers_per_sm"]:  # the launch's per-CTA check
        raise ScheduleError("a CTA's registers fit the register file", f"{warps} warps x {regs_per_warp} registers "
                            f"> {p['registers_per_sm']}", "lower the registers per thread or the threads", SOURCE)
    smem_per_cta = _round_up(smem_bytes + SMEM_RESERVED_PER_BLOCK, SMEM_ALLOC_UNIT)
    per_sub_partition = p["registers_per_sm"] // SUB_PARTITIONS // regs_per_warp
    limits = dict(blocks=MAX_BLOCKS_PER_SM, threads=MAX_THREADS_PER_SM // (warps * WARP),
                  registers=per_sub_partition * SUB_PARTITIONS // warps,
                  smem=p["smem_bytes_per_sm"] // smem_per_cta)
    n = min(limits.values())
    return Occupancy(n, next(k for k in LIMITERS if limits[k] == n), limits, regs_per_warp * warps, smem_per_cta)
