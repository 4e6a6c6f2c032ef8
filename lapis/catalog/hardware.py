"""Hardware limits of compute capability 9.0 (sm_90, the H100 and H200), defined once.

Sources: CUDA C++ Programming Guide, "Features and Technical Specifications" (table "Technical Specifications
per Compute Capability", cc 9.0) and the PTX ISA (setmaxnreg, 9.7.17.1). The fitted per-GPU values (clock,
bandwidths, pipe rates) live in the profiles (lapis/data/profiles), not here.
"""

SMEM_BYTES_PER_SM = 228 * 1024  # bytes: shared memory of one SM at the largest carveout (233472 B)
SMEM_BYTES_PER_BLOCK = 227 * 1024  # bytes: the most dynamic shared memory one CTA can opt into (232448 B)
SMEM_RESERVED_PER_BLOCK = 1024  # bytes: the system's per-CTA reservation, counted against the SM's 228 KiB
REGISTERS_PER_SM = 65536  # 32-bit registers
MAX_REGISTERS_PER_THREAD = 255
MAX_THREADS_PER_SM = 2048
MAX_BLOCKS_PER_SM = 32
WARP_THREADS = 32
WARPGROUP_THREADS = 128  # four consecutive warps (PTX ISA: wgmma, setmaxnreg)
SM_COUNT = {"h200": 132, "h100": 132}  # SXM parts; the H200 here reports 132 multiprocessors
# The L2 is two partitions, each caching the data the SMs of its own GPCs access (NVIDIA A100 and H100 Tensor Core
# GPU Architecture whitepapers, "L2 cache": "Each L2 partition localizes and caches data for memory accesses from
# SMs in the GPCs directly connected to the partition"): a line every SM reads is held in both, so such a stream
# sees half of cudaGetDeviceProperties' l2CacheSize.
L2_PARTITIONS = 2
