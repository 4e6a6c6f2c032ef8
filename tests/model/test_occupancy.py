"""lapis.model.occupancy against hand-computed cc 9.0 cases (the h200 profile: 65536 registers, 233472 B per SM,
232448 B per block)."""

import pytest

from lapis.errors import ScheduleError
from lapis.model.occupancy import resident_ctas
from lapis.model.profile import load_profile

H200 = load_profile("h200")


@pytest.mark.parametrize("threads, regs, smem, ctas, limiter, limits", [
    # h200-s1-serial: 128 threads, 154 registers (ptxas) -> 160 x 32 = 5120 per warp, 16384 // 5120 = 3 warps per
    # sub-partition, 12 per SM, 3 CTAs; smem 80 KiB + 1 KiB slack + 1 KiB static + 1 KiB reserved = 84992 B:
    # 233472 // 84992 = 2
    (128, 154, 81920 + 2048, 2, "smem", dict(blocks=32, threads=16, registers=3, smem=2)),
    # h200-s2-ws-ring as captured: 256 threads, 232 registers -> 7424 per warp, 2 per sub-partition, 8 per SM:
    # 1 CTA; smem 144 KiB + 3 KiB = 150528 B: 1
    (256, 232, 147456 + 2048, 1, "registers", dict(blocks=32, threads=8, registers=1, smem=1)),
    # 64 threads, 32 registers, no smem: 1024 per warp, 16 per sub-partition, 64 warps = 32 CTAs; 2048 // 64 = 32
    # threads-wise; 233472 // 1024 = 228 smem-wise; 32 blocks: blocks first among the ties
    (64, 32, 0, 32, "blocks", dict(blocks=32, threads=32, registers=32, smem=228)),
    # 256 threads, 128 registers: 4096 per warp, 4 per sub-partition, 16 per SM: 2 CTAs of 8 warps
    (256, 128, 0, 2, "registers", dict(blocks=32, threads=8, registers=2, smem=228)),
    # 768 threads (24 warps), 16 registers: 512 per warp, 32 per sub-partition, 128 // 24 = 5; 2048 // 768 = 2
    (768, 16, 0, 2, "threads", dict(blocks=32, threads=2, registers=5, smem=228)),
    # sub-partitions: 64 threads at 200 registers: 6400 per warp, 16384 // 6400 = 2 per sub-partition, 8 warps,
    # 4 CTAs (65536 // 12800 = 5 if the file were one pool)
    (64, 200, 0, 4, "registers", dict(blocks=32, threads=32, registers=4, smem=228)),
    # 128 B granularity: 45576 + 1024 = 46600 B rounds to 46720: 233472 // 46720 = 4 (46600 would give 5)
    (32, 16, 45576, 4, "smem", dict(blocks=32, threads=64, registers=32 * 4, smem=4)),
])
def test_hand_computed_residency(threads, regs, smem, ctas, limiter, limits):
    occ = resident_ctas(H200, threads, regs, smem)
    assert (occ.ctas_per_sm, occ.limiter, occ.limits) == (ctas, limiter, limits)


def test_what_one_cta_is_allocated():
    occ = resident_ctas(H200, 128, 154, 83968)
    assert (occ.registers_per_cta, occ.smem_per_cta) == (4 * 5120, 84992)


@pytest.mark.parametrize("threads, regs, smem, rule", [
    (1025, 32, 0, "a CTA has 1..1024 threads"),
    (128, 256, 0, "a thread has 1..255 registers"),
    (128, 32, 232449, "a CTA's shared memory fits smem_bytes_per_block"),
    # 1024 threads at 72 registers: 2304 per warp x 32 warps = 73728 > 65536
    (1024, 72, 0, "a CTA's registers fit the register file"),
])
def test_a_cta_that_cannot_launch_is_refused(threads, regs, smem, rule):
    with pytest.raises(ScheduleError, match=rule):
        resident_ctas(H200, threads, regs, smem)
