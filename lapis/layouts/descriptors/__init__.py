"""Matrix descriptors and what an MMA reads through them.

- sm90.py: the 64-bit wgmma matrix descriptor (PTX ISA 9.7.15.5.1.2.2).
- sm100.py: the tcgen05 shared-memory descriptor and instruction descriptor (PTX ISA 9.7.16.4).
- mma_read.py: the shared-memory bytes a wgmma reads through a descriptor pair, and its D.
- agreement.py: whether TMA-placed tiles and the descriptors that read them agree.
"""
