"""The committed blind predictions for the GEMM kernel: made before the kernel was first timed, never re-made.

The expected values are literals, read once from lapis/data/blind/gemm_ws.json and gemm_ws_n256.json as
committed: a blind record that changes has been re-made after its measurement and is blind no more.
"""

import pytest

from lapis.validate.blind import load

# variant, MxNxK, (block_n, stages, consumer_wgs), predicted µs (block_m 128, block_k 64 throughout)
GEMM_WS = [
    ("ws_s4_c2_n128", 2048, (128, 4, 2), 21.870), ("ws_s4_c2_n128", 4096, (128, 4, 2), 166.204),
    ("ws_s4_c2_n128", 8192, (128, 4, 2), 1294.589),
    ("ws_s3_c2_n128", 2048, (128, 3, 2), 21.870), ("ws_s3_c2_n128", 4096, (128, 3, 2), 166.204),
    ("ws_s3_c2_n128", 8192, (128, 3, 2), 1294.589),
    ("ws_s4_c1_n128", 2048, (128, 4, 1), 22.872), ("ws_s4_c1_n128", 4096, (128, 4, 1), 170.211),
    ("ws_s4_c1_n128", 8192, (128, 4, 1), 1310.621),
]


def params(block_n, stages, wgs):
    return dict(block_m=128, block_n=block_n, block_k=64, stages=stages, consumer_wgs=wgs)


def test_gemm_blind_file_holds_every_benchmarked_variant_and_size_as_committed():
    entries = load("gemm_ws")["entries"]
    assert [(e["variant"], e["schedule"], e["gpu"], e["shape"], e["params"]) for e in entries] == [
        (v, "h200-gemm-ws", "h200", f"{n}x{n}x{n}", params(*p)) for v, n, p, _ in GEMM_WS]
    assert [e["predicted_us"] for e in entries] == pytest.approx([us for *_, us in GEMM_WS], abs=5e-4)
    for e in entries:
        m = int(e["shape"].split("x")[0])
        assert e["tflops"] == pytest.approx(2 * m ** 3 / e["predicted_us"] / 1e6, abs=0.1)
        assert len(e["profile_hash"]) == 16 and len(e["model_hash"]) == 16


def test_n256_blind_file_holds_the_opt_in_variant_at_4096_and_8192():
    d = load("gemm_ws_n256")
    assert [(e["variant"], e["shape"], e["params"]) for e in d["entries"]] == [
        ("ws_s4_c2_n256", "4096x4096x4096", params(256, 4, 2)), ("ws_s4_c2_n256", "8192x8192x8192", params(256, 4, 2))]


def test_the_case_list_that_makes_the_file_is_the_benchmarks_default_grid():
    from lapis.validate.blind import cases
    assert cases("gemm_ws") == [dict(variant=v, schedule="h200-gemm-ws", gpu="h200", shape=f"{n}x{n}x{n}",
                                    params=params(*p)) for v, n, p, _ in GEMM_WS]


def _damaged(tmp_path, edit):
    import json

    from lapis.data import BLIND
    d = json.loads((BLIND / "attention_h200_s25.json").read_text())
    text = edit(d)
    path = tmp_path / "attention_h200_s25.json"
    path.write_text(text if isinstance(text, str) else json.dumps(d))
    return path


@pytest.mark.parametrize("edit, words", [
    (lambda d: '{"name": "attention_h200_s25", "entries": [', "one readable JSON file"),
    (lambda d: d["entries"][0].update(predicted_us="1618.9"), "entry 0: predicted_us '1618.9'"),
    (lambda d: d["entries"][3].update(predicted_us=-1.0), "entry 3: predicted_us -1.0"),
    (lambda d: d["entries"][1].update(predicted_us=float("nan")), "entry 1: predicted_us nan"),
    (lambda d: d["entries"][2].pop("predicted_us"), "entry 2: predicted_us None"),
    (lambda d: d["entries"].insert(0, dict(d["entries"][4], predicted_us=1.0)), "entry 5: a second entry"),
    (lambda d: d["entries"][6].pop("tflops"), "entry 6: tflops None"),
    (lambda d: d["entries"][7]["params"].update(causal="0"), "entry 7: params.causal '0' (0 or 1)"),
    (lambda d: d.update(date="x"), "date 'x'"),
    (lambda d: d.update(entries=None), "entries None"),
    (lambda d: d.update(name="attention_h200_s24"), "name 'attention_h200_s24'"),
    (lambda d: d["entries"][0].update(variant="s24"), "entry 0: ('s24', 'h200-s9-tuned', '8x16x4096x128', False) is "
                                                      "not a case of set attention_h200_s25"),
    (lambda d: d["entries"][1].update(shape="8x16x4096x64"), "entry 1: ('s25', 'h200-s9-tuned', '8x16x4096x64',"),
    (lambda d: d["entries"][2].update(schedule="h200-s8-persistent"), "entry 2: ('s25', 'h200-s8-persistent'"),
    (lambda d: d["entries"][3]["params"].update(persistent_order="lpt_l3"), "entry 3: params.persistent_order "
                                                                            "'lpt_l3' (one of grid_stride"),
])
def test_a_damaged_blind_file_is_refused_by_name(tmp_path, edit, words):
    from lapis.errors import CaptureError
    from lapis.validate.blind import read
    with pytest.raises(CaptureError, match="blind") as e:
        read(_damaged(tmp_path, edit))
    assert words in str(e.value) and "restore it from git" in str(e.value)


def test_every_committed_blind_set_reads_clean():
    from lapis.data import BLIND
    from lapis.validate.blind import read
    assert all(read(p)["entries"] for p in sorted(BLIND.glob("*.json")))
