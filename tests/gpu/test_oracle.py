"""The oracle's protocol, faults and restarts, on the CPU with the model backend (LAPIS_ORACLE_BACKEND=model).

Expected bytes are literals or slices of the global image, not the model's output, wherever a case allows it.
"""

import os
import signal
import threading

import numpy as np
import pytest

from lapis.errors import LayoutError
from lapis.gpu.oracle import SENTINEL, EncodeResult, Oracle, OracleFault, global_image
from lapis.layouts.canonical import CanonicalLayout
from lapis.layouts.descriptors.sm90 import descriptor_for
from lapis.layouts.tma import EncodeArgs, TensorMap


@pytest.fixture(scope="module")
def oracle():
    o = Oracle("model", timeout_s=60)
    yield o
    o.close()


def test_a_rank1_u8_load_is_the_global_bytes_and_oob_is_zero(oracle):
    t = TensorMap("u8", (256,), (), (64,))
    g = global_image(t)
    assert np.array_equal(oracle.tma_load(t, (16,), 0), g[16:80])
    got = oracle.tma_load(t, (-16,), 128)  # 16 elements before the tensor: zero fill
    assert np.array_equal(got[:16], np.zeros(16, np.uint8)) and np.array_equal(got[16:], g[:48])


def test_a_given_global_image_is_used_and_the_128B_swizzle_moves_chunks(oracle):
    t = TensorMap("u8", (128, 8), (128,), (128, 8), swizzle="128B")
    g = np.arange(128 * 8, dtype=np.uint32).astype(np.uint8)  # byte i holds i % 256
    got = oracle.tma_load(t, (0, 0), 0, global_image=g)
    # row r's 16 B chunk c lands at chunk c ^ r (PTX ISA 5.5.7): chunk 1 of row 1 sits at chunk 0
    assert list(got[128:132]) == [144, 145, 146, 147]
    assert list(got[:4]) == [0, 1, 2, 3]


def test_narrow_swizzled_rows_keep_the_sentinel_in_their_padding(oracle):
    t = TensorMap("bf16", (64, 16), (128,), (16, 2), swizzle="128B")  # 32 B rows padded to 128 B
    got = oracle.tma_load(t, (0, 0), 0)
    assert got.size == 256 and (got == SENTINEL).sum() == 256 - 64


def test_encode_names_the_driver_result(oracle):
    assert oracle.encode(TensorMap("bf16", (64, 64), (128,), (64, 64), swizzle="128B")) == EncodeResult("CUDA_SUCCESS")
    bad = EncodeArgs(9, 2, 0, (64, 64), (128,), (64, 64), (1, 1), swizzle=4)  # 128B_ATOM_32B on sm_90
    r = oracle.encode(bad)
    assert r.name == "CUDA_ERROR_INVALID_VALUE" and not r.accepted
    assert oracle.encode(dict(dtype=9, rank=2, addr_offset=8, dims=[64, 64], strides=[128], box=[64, 64],
                              elem_strides=[1, 1], interleave=0, swizzle=0, l2=0, oob=0)).name != "CUDA_SUCCESS"


def test_wgmma_read_returns_d_of_a_one_hot_product(oracle):
    a = CanonicalLayout("K", "128B", "bf16", 64, 64)
    b = CanonicalLayout("K", "128B", "bf16", 8, 64)
    image = np.zeros(16 * 1024, np.uint8)
    m, k = np.meshgrid(np.arange(64), np.arange(64), indexing="ij")
    av = np.where(k == m % 16, 0x3F80, 0).astype("<u2")  # A[m, k] = 1.0 iff k = m % 16
    n, kb = np.meshgrid(np.arange(8), np.arange(64), indexing="ij")
    bv = (0x4000 + 16 * n + kb).astype("<u2")  # B[n, k]: bf16 2.0 + ...
    for lay, base, v, r, c in ((a, 0, av, m, k), (b, 8192, bv, n, kb)):
        addr = lay.address(r, c, base)
        image[addr], image[addr + 1] = v & 0xFF, v >> 8
    d = oracle.wgmma_read(image, descriptor_for(a, 0).encode(), descriptor_for(b, 8192).encode(), "bf16", 8)
    # D[m, n] = B[n, m % 16]; bf16 0x4000 + x is 2 + x / 64 for x < 128
    want = 2 + (16 * np.arange(8)[None, :] + np.arange(64)[:, None] % 16) / 64
    assert d.shape == (64, 8) and d.dtype == np.float32 and np.array_equal(d, want.astype(np.float32))


def test_a_fault_is_data_and_keeps_the_child_when_harmless():
    with Oracle("model") as o:
        t = TensorMap("bf16", (128, 64), (256,), (64, 16), swizzle="128B")
        r = o.tma_load(t, (0, 0), 64)  # not 128 B aligned: the H200 raises cudaErrorMisalignedAddress
        assert isinstance(r, OracleFault) and r.error == "cudaErrorMisalignedAddress" and not r
        assert isinstance(o.tma_load(t, (0, 0), 128), np.ndarray) and o.starts == 1


def test_killing_the_child_mid_request_returns_a_fault_and_the_next_call_starts_a_new_one():
    with Oracle("model") as o:
        assert o.ping()["backend"] == "model"
        first = o.pid
        threading.Timer(0.5, os.kill, (first, signal.SIGKILL)).start()
        r = o.request({"op": "_sleep", "seconds": 20})
        assert isinstance(r, OracleFault) and r.error == "child exited" and "-9" in r.detail
        assert o.ping()["backend"] == "model" and o.pid != first and o.starts == 2


def test_a_request_past_the_timeout_is_a_fault_and_replaces_the_child():
    with Oracle("model", timeout_s=60) as o:
        r = o.request({"op": "_sleep", "seconds": 20}, timeout_s=0.5)
        assert isinstance(r, OracleFault) and r.error == "timeout"
        assert o.pid is None  # the hung child is gone, not left running
        assert o.ping()["backend"] == "model" and o.starts == 2


def test_a_gpu_backend_without_a_gpu_answers_with_a_fault_not_a_crash():
    with Oracle("gpu", timeout_s=60) as o:
        r = o.ping()
    assert isinstance(r, OracleFault) and r.error  # e.g. ModuleNotFoundError (no cupy) or a CUDA error name


def test_bad_arguments_raise_named_errors():
    with pytest.raises(LayoutError, match="unknown oracle backend"):
        Oracle("fpga")
    o = Oracle("model")
    with pytest.raises(LayoutError, match="TensorMap, EncodeArgs"):
        o.encode("128B")
    with pytest.raises(LayoutError, match="uint8"):
        o.wgmma_read(np.zeros(64, np.float32), 0, 0, "bf16", 8)
    assert o.starts == 0  # nothing was sent


@pytest.mark.parametrize("call,words", [
    (lambda o: o.encode({}), "an encode case dict holds every cuTensorMapEncodeTiled argument: got missing ['dtype'"),
    (lambda o: o.encode(dict(dtype=0, rank=1, addr_offset=0, dims=[float("nan")], strides=[], box=[1],
                             elem_strides=[1], interleave=0, swizzle=0, l2=0, oob=0)), "got dims = [nan]"),
    (lambda o: o.wgmma_read(np.zeros(1024, np.uint8), float("nan"), 0, "bf16", 8), "desc_a is an integer"),
    (lambda o: o.wgmma_read(np.zeros(1024, np.uint8), 0, 1 << 64, "bf16", 8), "desc_b is an integer"),
    (lambda o: o.wgmma_read(np.zeros(1024, np.uint8), 0, 0, "bf16", float("nan")), "n is an integer"),
    (lambda o: o.wgmma_read(np.zeros(1024, np.uint8), 0, 0, ["bf16"], 8), "dtype is a name"),
])
def test_bad_arguments_are_layout_errors_before_any_request(call, words):
    o = Oracle("model")
    with pytest.raises(LayoutError) as e:
        call(o)
    assert words in str(e.value) and o.starts == 0  # refused before a child was started


@pytest.mark.parametrize("coords,offset,words", [
    ([0, float("nan")], 0, "integer coordinates"), ([0, 0], float("nan"), "integer smem_offset"),
    ("00", 0, "integer coordinates"), (None, 0, "integer coordinates"),
])
def test_tma_load_refuses_coordinates_or_offsets_it_cannot_send(coords, offset, words):
    o = Oracle("model")
    tmap = TensorMap("f16", (64, 8), (128,), (64, 8), (1, 1), swizzle="128B")
    with pytest.raises(LayoutError) as e:
        o.tma_load(tmap, coords, offset)
    assert words in str(e.value) and o.starts == 0
