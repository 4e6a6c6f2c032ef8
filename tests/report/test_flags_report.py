"""The report prints a flag as "yes" or "no" (and "-" or "not measured" where it has none), never Python's True or
False: the Kernels table's sanitizer column, the validation table's causal column and the wgmma section's settled
facts over the shipped H200 captures."""

from lapis.report import yes_no

ROW = dict(variant="s9", shape="8x16x4096x128", causal=True, tflops=400.0, spread_pct=1.5, cudnn_tflops=500.0,
           ratio_to_cudnn=0.8, rel_err=dict(normal=1e-3, heavy=2e-3), sanitizer_clean=True,
           instrumentation_overhead_pct=4.0, blind_predicted_tflops=440.0, predicted_tflops=420.0,
           blind_err_pct=10.0, err_pct=5.0)
CASE = dict(variant="s9", shape="8x16x4096x128", causal=False, predicted_us=100.0, measured_us=110.0,
            err_pct=-9.1, blind_err_pct=None, first_divergence=None, steady_divergence=None)


def test_yes_no():
    assert (yes_no(True), yes_no(False), yes_no(None), yes_no(None, none="not measured")) == \
        ("yes", "no", "-", "not measured")


def test_kernels_sanitizer_column_says_yes_no_or_dash():
    from lapis.report.kernels import _table
    md = _table([ROW, dict(ROW, sanitizer_clean=False), dict(ROW, sanitizer_clean=None)])
    column = md[0].split("|").index(" sanitizer clean ")
    assert [line.split("|")[column].strip() for line in md[2:]] == ["yes", "no", "-"]


def test_validation_causal_column_says_yes_or_no():
    from lapis.report.validation import _cases
    md = _cases(dict(per_case=[CASE, dict(CASE, causal=True)]))
    assert md[2].startswith("| `s9` | 8x16x4096x128 | no | 100.0 |")
    assert md[3].startswith("| `s9` | 8x16x4096x128 | yes | 100.0 |")


def test_mma_section_states_the_settled_facts_in_words(tmp_path):
    from lapis.report.build import mma_section
    md, _ = mma_section(None, tmp_path)
    assert "True" not in md and "False" not in md
    # the H200 captures (tests/layouts/test_mma_read.py): LBO ignored, base offset 0 reads the TMA tile, PTX's
    # formula does not; the mismatched pair's figure is predicted exactly
    assert "- LBO is ignored for swizzled K-major operands: yes." in md
    assert "read correctly with base offset 0: yes; with PTX's (start >> 7) & 7: no (that formula" in md
    assert "896 of 1024 elements read from elsewhere; predicted equals measured: yes]" in md
