"""The blind predictions file for the GEMM kernel mirrors the benchmark's cases and carries its hashes."""

from lapis.validate.blind import gemm_ws_cases, load
from lapis.gpu.bench_gemm import VARIANTS


def test_gemm_blind_file_covers_every_benchmarked_variant_and_size_with_the_kernel_parameters():
    d = load("gemm_ws")
    keys = ("variant", "schedule", "gpu", "shape", "params")
    assert [{k: e[k] for k in keys} for e in d["entries"]] == gemm_ws_cases()
    for e in d["entries"]:
        assert e["params"] == VARIANTS[e["variant"]]
        m = int(e["shape"].split("x")[0])
        assert abs(e["tflops"] - 2 * m ** 3 / e["predicted_us"] / 1e6) < 0.1
        assert len(e["profile_hash"]) == 16 and len(e["model_hash"]) == 16


def test_n256_blind_file_holds_the_opt_in_variant_at_4096_and_8192():
    d = load("gemm_ws_n256")
    assert [(e["variant"], e["shape"]) for e in d["entries"]] == [("ws_s4_c2_n256", "4096x4096x4096"),
                                                                 ("ws_s4_c2_n256", "8192x8192x8192")]
    assert all(e["params"] == VARIANTS["ws_s4_c2_n256"] for e in d["entries"])
