"""Resident CTAs per SM from a kernel's block size, registers per thread and shared memory (CUDA occupancy rules).

The count is the smallest of four limits, each computed the way the CUDA occupancy calculator does
(cuda_occupancy.h in the CUDA Toolkit, `cudaOccMaxActiveBlocksPerMultiprocessor`):
- threads: resident warps per SM // warps per CTA;
- registers: registers are allocated per warp, registers_per_thread x 32 rounded up to the allocation unit;
  warps that fit the register file // warps per CTA;
- shared memory: static + dynamic bytes plus the bytes the system reserves per CTA, rounded up to the
  allocation unit; the SM's shared memory (largest carveout) // that;
- the resident-CTA cap.
SM90 holds the compute capability 9.0 values: CUDA C++ Programming Guide, "Technical Specifications per Compute
Capability" (64K 32-bit registers, 2048 threads = 64 warps and 32 CTAs per SM, 228 KB shared memory per SM,
227 KB per CTA, 1 KB reserved per CTA); allocation units (256 registers per warp, 128 B of shared memory) from
cuda_occupancy.h / the occupancy calculator for cc 9.0. Bytes are bytes, registers are 32-bit registers.
"""

from __future__ import annotations

from lapis.errors import LayoutError

__all__ = ["SM90", "resident_ctas"]

SM90 = dict(warps_per_sm=64, ctas_per_sm=32, registers_per_sm=65536, register_unit=256, max_registers=255,
            threads_per_cta=1024, smem_per_sm=233472, smem_per_cta=232448, smem_unit=128, smem_reserved=1024)
WARP = 32


def _ceil(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def _check(threads: int, registers: int, smem_bytes: int, lim: dict) -> None:
    if not 0 < threads <= lim["threads_per_cta"]:
        raise LayoutError(f"a CTA has 1 to {lim['threads_per_cta']} threads", f"threads = {threads}",
                          "launch a smaller block")
    if not 0 < registers <= lim["max_registers"]:
        raise LayoutError(f"a thread uses 1 to {lim['max_registers']} registers", f"registers = {registers}",
                          "use ptxas's 'Used N registers'")
    if not 0 <= smem_bytes <= lim["smem_per_cta"]:
        raise LayoutError(f"a CTA addresses at most {lim['smem_per_cta']} B of shared memory (static + dynamic)",
                          f"smem_bytes = {smem_bytes}", "shrink the tiles or the ring")


def resident_ctas(threads: int, registers: int, smem_bytes: int, limits: dict = SM90) -> dict:
    """CTAs of one kernel resident on one SM, and each limit.

    threads: block size; registers: per thread (ptxas "Used N registers"); smem_bytes: static + dynamic shared
    memory per CTA, without the reserved bytes (they are added here). Returns {ctas, bound_by (the limits
    equal to ctas), limits: {threads, registers, smem, ctas}, registers_per_cta, smem_per_cta (allocated,
    reserved bytes included)}. Raises LayoutError for a block, register count or smem size no launch accepts."""
    lim = limits
    _check(threads, registers, smem_bytes, lim)
    warps = -(-threads // WARP)
    regs_per_warp = _ceil(registers * WARP, lim["register_unit"])
    smem = _ceil(smem_bytes + lim["smem_reserved"], lim["smem_unit"])
    by = dict(threads=lim["warps_per_sm"] // warps,
              registers=(lim["registers_per_sm"] // regs_per_warp) // warps,
              smem=lim["smem_per_sm"] // smem,
              ctas=lim["ctas_per_sm"])
    n = min(by.values())
    return dict(ctas=n, bound_by=[k for k, v in by.items() if v == n], limits=by,
                registers_per_cta=regs_per_warp * warps, smem_per_cta=smem)
