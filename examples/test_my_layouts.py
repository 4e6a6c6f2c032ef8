"""Property tests a kernel engineer writes for their own layouts, checked against the GPU with lapis's oracles.

The kernel (this file's "my_*" builders) loads K-major bf16 tiles of BLOCK_M x 64 (one 128 B swizzle atom
column; BLOCK_M in 64, 128, 256) with one TMA box each, and reads them with wgmma as the B operand (N = BLOCK_M).
Three properties, each at 200 examples:

(a) lapis's placement model equals the hardware for this layout family: the bytes lapis predicts for a box
    (lapis.layouts.tma.load_box) are the bytes the GPU's TMA writes (oracle.tma_load);
(b) the wgmma descriptor my_b_descriptor builds reads what the TMA wrote: lapis's agreement checker says so, and
    the GPU's wgmma (oracle.wgmma_read) returns the D that the global tensor's values give;
(c) the driver accepts every tensor map my_b_map_args builds (oracle.encode).

Run: `python -m pytest examples/test_my_layouts.py --lapis-gpu -p lapis.testing.pytest_plugin` (or without -p
once lapis is installed: the plugin is the `lapis` pytest11 entry point). LAPIS_ORACLE_BACKEND=model answers
from lapis's model on a machine without a GPU. LAPIS_EXAMPLE_BUG=sbo plants a layout bug (an SBO of 512 B
instead of 8 rows x 128 B = 1024 B) that property (b) must find.
"""

import os

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from lapis.gpu.oracle import SENTINEL, global_image
from lapis.layouts.canonical import CanonicalLayout
from lapis.layouts.descriptors.agreement import check_agreement
from lapis.layouts.descriptors.sm90 import WgmmaDescriptor, descriptor_for
from lapis.layouts.tma import EncodeArgs, TensorMap, load_box
from lapis.testing.strategies import box_coords, smem_offsets

pytestmark = pytest.mark.lapis_gpu
# No explain phase: it re-runs a failing example hundreds of times, each a GPU round trip.
EXAMPLES = settings(max_examples=200, deadline=None, phases=[p for p in Phase if p != Phase.explain])
BLOCK_M = (64, 128, 256)
BLOCK_K = 64  # bf16 elements: one 128 B swizzle span
BF16 = 9  # CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
SW128 = 3  # CU_TENSOR_MAP_SWIZZLE_128B
K_STEP = 16  # bf16 elements of K per wgmma


# ------------------------------------------------------------ the kernel's builders --

def my_b_map_args(m_total: int, k_total: int, block_m: int) -> dict:
    """cuTensorMapEncodeTiled arguments for B (m_total x k_total bf16, row-major: K contiguous)."""
    row_bytes = -(-k_total * 2 // 16) * 16  # rows padded to 16 B, as the allocation does
    return dict(dtype=BF16, rank=2, dims=[k_total, m_total], strides=[row_bytes], box=[BLOCK_K, block_m],
                elem_strides=[1, 1], interleave=0, swizzle=SW128, l2=2, oob=0)


def my_b_descriptor(smem_addr: int, k_step: int) -> WgmmaDescriptor:
    """The wgmma descriptor of K-step k_step of a tile the TMA put at smem_addr (K-major, 128B swizzle)."""
    sbo = 512 if os.environ.get("LAPIS_EXAMPLE_BUG") == "sbo" else 8 * 128  # 8-row groups are 1024 B apart
    return WgmmaDescriptor(start_address=smem_addr + 32 * k_step, lbo=16, sbo=sbo, base_offset=0, swizzle="128B")


def tensor_map(args: dict) -> TensorMap:
    return TensorMap.from_driver_args(args["dtype"], args["dims"], args["strides"], args["box"],
                                      args["elem_strides"], args["interleave"], args["swizzle"], args["l2"],
                                      args["oob"])


def raw(args: dict) -> EncodeArgs:
    return EncodeArgs(args["dtype"], args["rank"], 1 << 40, args["dims"], args["strides"], args["box"],
                      args["elem_strides"], args["interleave"], args["swizzle"], args["l2"], args["oob"])


# -------------------------------------------------------------------- properties --

shapes = st.tuples(st.sampled_from(BLOCK_M), st.integers(1, 8), st.integers(1, 8))  # block, M tiles, K tiles


@EXAMPLES
@given(shape=shapes, data=st.data())
def test_a_lapis_placement_is_what_the_tma_writes(lapis_oracle, shape, data):
    block_m, mt, kt = shape
    t = tensor_map(my_b_map_args(block_m * mt + data.draw(st.integers(0, 9)), BLOCK_K * kt, block_m))
    coords = data.draw(box_coords(t, "any"))  # partly out-of-bounds boxes included
    off = data.draw(smem_offsets(t))  # on and off the 1024 B swizzle repeat
    want = np.full(t.smem_footprint, SENTINEL, np.uint8)
    load_box(t, global_image(t), coords, 1024 + off, want, 1024 + off)
    got = lapis_oracle.tma_load(t, coords, off)
    assert isinstance(got, np.ndarray), got
    assert np.array_equal(got, want), f"first differing byte {int(np.argmax(got != want))} of {got.size}"


PARTNER_OFF = 96 * 1024  # the one-hot A operand, away from every drawn B tile
IMAGE_BYTES = PARTNER_OFF + 64 * BLOCK_K * 2


def bf16_values(n: int) -> np.ndarray:
    """n finite bf16 bit patterns (0.0078125 .. 511), distinct in every run of 2048."""
    return (0x3C00 + np.arange(n) % 2048).astype("<u2")


@EXAMPLES
@given(shape=shapes, k_step=st.integers(0, BLOCK_K // K_STEP - 1), data=st.data())
def test_b_my_descriptor_reads_what_the_tma_wrote(lapis_oracle, shape, k_step, data):
    block_m, mt, kt = shape
    args = my_b_map_args(block_m * mt, BLOCK_K * kt, block_m)
    t = tensor_map(args)
    m0, k0 = block_m * data.draw(st.integers(0, mt - 1)), BLOCK_K * data.draw(st.integers(0, kt - 1))
    off = data.draw(st.integers(0, (PARTNER_OFF - t.smem_footprint) // 128)) * 128
    descs = [my_b_descriptor(off, s) for s in range(BLOCK_K // K_STEP)]
    # lapis's model: does every K-step read the intended (n, k)?
    verdict = check_agreement(t, [((k0, m0), off)], (k0, m0), "K", block_m, descs, transpose=False)
    assert verdict.ok, verdict.summary()
    # the hardware: B from the TMA, A one-hot (A[m, k] = 1 iff k = 16 k_step + m % 16), so D[m, n] = B[n, 16 k_step + m % 16]
    values = bf16_values(t.dims[0] * t.dims[1]).reshape(t.dims[1], t.dims[0])
    tile = lapis_oracle.tma_load(t, (k0, m0), off, global_image=values.view(np.uint8).ravel())
    assert isinstance(tile, np.ndarray), tile
    image = np.zeros(IMAGE_BYTES, np.uint8)
    image[off:off + tile.size] = tile
    a = CanonicalLayout("K", "128B", "bf16", 64, BLOCK_K)
    m, k = np.meshgrid(np.arange(64), np.arange(BLOCK_K), indexing="ij")
    one = np.where(k == K_STEP * k_step + m % K_STEP, 0x3F80, 0).astype("<u2")
    addr = a.address(m, k, PARTNER_OFF)
    image[addr], image[addr + 1] = one & 0xFF, one >> 8
    d = lapis_oracle.wgmma_read(image, descriptor_for(a, PARTNER_OFF, k_step).encode(),
                                descs[k_step].encode(), "bf16", block_m)
    assert isinstance(d, np.ndarray), d
    b = values[m0:m0 + block_m, k0 + K_STEP * k_step: k0 + K_STEP * (k_step + 1)]
    want = (b.astype(np.uint32) << 16).view(np.float32)[np.arange(block_m)[None, :], np.arange(64)[:, None] % K_STEP]
    assert np.array_equal(d, want), f"{int((d != want).sum())} of {d.size} elements of D differ"


@EXAMPLES
@given(block_m=st.sampled_from(BLOCK_M), m_total=st.integers(1, 1 << 20), k_total=st.integers(1, 1 << 16))
def test_c_the_driver_accepts_every_map_i_build(lapis_oracle, block_m, m_total, k_total):
    r = lapis_oracle.encode(raw(my_b_map_args(m_total, k_total, block_m)))
    assert r and r.accepted, r
