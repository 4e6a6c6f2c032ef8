"""Campaign version 5 (kernels/micro_bar_v1.cu, `lapis capture micro --only bar`): its items, how one launch's
records become values, the launch itself against a stand-in for cupy, and the SASS forms the hop kernels must have.
No GPU: every record and raw number here is written by hand."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from lapis.gpu import capture_micro, sass
from lapis.model import micro_campaign as mc

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "micro" / "bar-parser-fixture.json"


def test_v5_items_names_kernels_and_counts():
    items = {m["name"]: m for m in mc.items_v5_bar(132)}
    assert sorted(items) == sorted(
        [f"bar.hop.{f}.t{t}" for f in ("imm", "pred", "reg") for t in (256, 384)]
        + [f"bar.{k}.t{t}" for k in ("sync_all", "sync_present", "try_wait") for t in (256, 384)])
    hop = items["bar.hop.pred.t384"]
    assert hop["kind"] == "bar" and hop["kernel"] == "micro_bar_hop_pred"
    assert hop["params"] == dict(ctas=132, threads=384, iters=4096, count=8192, what=hop["params"]["what"])
    assert items["bar.sync_present.t256"]["params"]["count"] == 13 * 1024
    assert items["bar.try_wait.t256"]["params"]["count"] == items["bar.try_wait.t256"]["params"]["iters"] == 8192
    for m in items.values():
        assert capture_micro.source_of(m["kernel"]) == "micro_bar_v1"
        assert m["params"]["ctas"] == 132 and m["params"]["threads"] in (256, 384)
    # `--only bar` selects exactly version 5, and the names stay unique across versions
    names = [m["name"] for m in mc.all_items(132)]
    assert len(names) == len(set(names)) and sorted(n for n in names if n.startswith("bar")) == sorted(items)
    assert mc.UNITS["bar"] == "cycles"


def test_the_kernel_file_defines_every_kernel_with_the_host_signature():
    text = (capture_micro.KERNEL_DIR / "micro_bar_v1.cu").read_text()
    assert "#define MICRO_BAR_ARGS uint32_t iters, uint64_t timeout_ns, uint64_t err_addr, uint64_t* out" in text
    for kernel in {m["kernel"] for m in mc.items_v5_bar(132)}:
        assert re.search(rf"__launch_bounds__\(384, 1\) {kernel}\(MICRO_BAR_ARGS\)", text), kernel
    assert "constexpr int RECORD_WORDS = 6;" in text and capture_micro.BAR_WORDS == 6
    assert "constexpr int PRESENT_BARS = 14;" in text and mc.BAR_PRESENT_TIMED == 14 - 1


def _records(ctas=4):
    # clk0, clk1, ns0, ns1, smid, timed cycles
    return np.array([[1000, 1000 + 8192 * (50 + k), 0, 4000 + k, 7 * k, 8192 * (50 + k)] for k in range(ctas)],
                    dtype=np.int64)


def test_bar_values_by_hand():
    v = capture_micro.bar_values(_records())
    # timed cycles 8192 x 50, 51, 52, 53: median 8192 x 51.5
    assert v == dict(cycles=421888.0, cycles_max=434176, window_cycles=421888.0, ns=4001.5, distinct_sms=4)
    rec = _records()
    rec[:, 5] = [100, 200, 300, 400]  # sync_present: the timed stretches are a part of the window
    assert capture_micro.bar_values(rec)["cycles"] == 250.0


@pytest.mark.parametrize("edit, words", [
    (lambda r: r.__setitem__((2, slice(None)), 0), "unwritten or corrupt"),  # a CTA that never wrote
    (lambda r: r.__setitem__((1, 5), r[1, 1] - r[1, 0] + 1), "unwritten or corrupt"),  # timed > window
    (lambda r: r.__setitem__((0, 3), 0), "unwritten or corrupt"),  # ns window not positive
])
def test_a_bad_record_fails_the_measurement(edit, words):
    rec = _records()
    edit(rec)
    with pytest.raises(RuntimeError, match=words):
        capture_micro.bar_values(rec)


def test_records_of_the_wrong_shape_fail_the_measurement():
    with pytest.raises(RuntimeError, match="rows of 6 words, got shape"):
        capture_micro.bar_values(np.zeros((4, 5), np.int64))
    with pytest.raises(RuntimeError, match=r"got shape \(0, 6\)"):
        capture_micro.bar_values(np.zeros((0, 6), np.int64))


class _Array:
    def __init__(self, n):
        self.a = np.full(n, 99, np.uint64)  # not zeros: measure_bar must zero it itself

    def fill(self, v):
        self.a[:] = v

    def get(self):
        return self.a.copy()


class _Cupy:
    uint64 = np.uint64

    def zeros(self, n, dtype):
        return _Array(n)

    class cuda:
        class Device:
            def synchronize(self):
                pass


class _Bench:
    """capture_micro.Bench's run over a stand-in kernel that writes `_records` (CTAs in `skip` write nothing from
    the second launch on)."""
    run = capture_micro.Bench.run
    err_ptr = 0x7000

    def __init__(self, skip=()):
        self.cp, self.calls, self.skip = _Cupy(), [], skip

    def fn(self, kernel, smem):
        def launch(grid, block, args, shared_mem):
            self.calls.append((kernel, smem, grid, block, shared_mem, args[:3]))
            rec = _records(grid[0])
            for k in self.skip if len(self.calls) > 1 else ():
                rec[k] = args[3].a.reshape(-1, 6)[k]
            args[3].a[:] = rec.reshape(-1).astype(np.uint64)
        return launch


def test_measure_bar_launches_one_cta_per_sm_with_the_kernel_signature():
    m = next(m for m in mc.items_v5_bar(4) if m["name"] == "bar.hop.reg.t384")
    b = _Bench()
    raw = capture_micro.measure_bar(b, m, repeats=3)
    assert len(b.calls) == 4  # one untimed warm-up, 3 timed
    kernel, smem, grid, block, shared, head = b.calls[0]
    assert (kernel, smem, grid, block, shared) == ("micro_bar_hop_reg", 120 * 1024, (4,), (384,), 120 * 1024)
    assert [type(x) for x in head] == [np.uint32, np.uint64, np.uint64]
    assert head == (4096, capture_micro.WATCHDOG_NS, 0x7000)
    assert raw["cycles"] == [421888.0] * 3 and raw["distinct_sms"] == [4] * 3


def test_a_cta_that_stops_writing_fails_the_measurement_not_a_stale_record():
    m = next(m for m in mc.items_v5_bar(4) if m["name"] == "bar.sync_all.t256")
    with pytest.raises(RuntimeError, match="unwritten or corrupt"):
        capture_micro.measure_bar(_Bench(skip=(2,)), m, repeats=2)


def test_finish_turns_the_fixture_raw_cycles_into_cycles_per_hand_over():
    """The parser fixture's bar.hop.reg.t384: 409600, 425984, 417792 cycles for 8192 hand-overs: 50, 52, 51."""
    doc = json.loads(FIXTURE.read_text())
    assert doc["_note"].startswith("PARSER FIXTURE")
    m = next(x for x in doc["measurements"] if x["name"] == "bar.hop.reg.t384")
    m = {k: v for k, v in m.items() if k != "value"}
    capture_micro.finish(m)
    assert m["value"]["median"] == 51.0 and m["value"]["unit"] == "cycles" and m["value"]["n"] == 3
    assert m["value"]["spread_pct"] == pytest.approx(100 * 1.0 / 51)  # IQR 50.5 .. 51.5


def test_a_result_file_without_repeats_is_a_fault(tmp_path):
    f = tmp_path / "res_0.json"
    f.write_text(json.dumps(dict(status="ok", raw=dict(cycles=[]))))
    m = dict(next(m for m in mc.items_v5_bar(132) if m["name"] == "bar.hop.imm.t256"), **capture_micro.read_result(f))
    capture_micro.finish(m)
    assert m["status"] == "fault" and "no value from the raw data" in m["error"] and "value" not in m


def _sass_of(fn_sass, name):
    body = fn_sass.split(f"Function : {name}\n", 1)[1].split("Function : ", 1)[0]
    return [re.sub(r"\s+", " ", line.split("*/", 1)[1].split(";")[0]).strip()
            for line in body.splitlines() if re.match(r"\s+/\*[0-9a-f]{4}\*/", line)]


@pytest.mark.skipif(shutil.which("nvcc") is None or sass.tool_dir() is None, reason="nvcc or cuobjdump missing")
def test_the_hop_kernels_have_the_attention_kernels_turn_forms(tmp_path):
    """imm: BAR.ARV + BAR.SYNC on immediate ids, nothing predicated; pred: s16's predicated BAR.SYNC pair;
    reg: s17's one BAR.SYNC on a register."""
    cubin = tmp_path / "bar.cubin"
    subprocess.run(capture_micro.NVCC + ["-o", str(cubin), str(capture_micro.KERNEL_DIR / "micro_bar_v1.cu")],
                   check=True, timeout=300)
    text = subprocess.run([str(sass.tool_dir() / "cuobjdump"), "-sass", str(cubin)], capture_output=True,
                          text=True, check=True).stdout
    imm, pred, reg = (_sass_of(text, f"micro_bar_hop_{f}") for f in ("imm", "pred", "reg"))
    assert "BAR.SYNC.DEFER_BLOCKING 0x1, 0x100" in imm and "BAR.ARV 0x2, 0x100" in imm
    assert not [i for i in imm if i.startswith("@") and "BAR" in i]
    assert "@P1 BAR.SYNC.DEFER_BLOCKING 0x2, 0x100" in pred and "@!P1 BAR.SYNC.DEFER_BLOCKING 0x1, 0x100" in pred
    assert any(re.fullmatch(r"BAR\.SYNC\.DEFER_BLOCKING R\d+, 0x100", i) for i in reg)
    assert not [i for i in reg if i.startswith("@") and "BAR.SYNC" in i]
