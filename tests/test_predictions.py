"""The committed prediction cache behind the report's Schedules section."""

import pytest

from lapis.pipeline_sim import predictions
from lapis.pipeline_sim.predictions import predict
from lapis.pipeline_sim.simulate import simulate
from lapis.report_schedules import report_cases

CASE = ("h200-gemm-ws", "h200", "1024x1024x1024")


def test_a_cached_prediction_is_reused_and_keyed_by_its_parameters():
    cache = {}
    first, fresh1 = predict(*CASE, {}, cache)
    again, fresh2 = predict(*CASE, {}, cache)
    assert fresh1 and not fresh2 and again == first
    other, fresh3 = predict(*CASE, {"stages": 2}, cache)
    assert fresh3 and len(cache) == 2
    assert first["tflops"] == pytest.approx(simulate(*CASE)["tflops"])


def test_an_edited_model_or_profile_makes_entries_stale(monkeypatch):
    cache = {}
    predict(*CASE, {}, cache)
    monkeypatch.setattr(predictions, "model_hash", lambda: "edited")
    assert predict(*CASE, {}, cache)[1]
    monkeypatch.setattr(predictions, "profile_hash", lambda gpu: "refitted")
    assert predict(*CASE, {}, cache)[1]
    assert predict(*CASE, {}, cache, resimulate=True)[1]


def test_the_committed_predictions_are_current():
    cache = predictions.load()
    missing = [c[:3] for c in report_cases() if predictions.key(*c) not in cache]
    assert not missing, f"stale predictions {missing[:3]}...: run python -m lapis.pipeline_sim.predictions"
    gemm = next(c for c in report_cases() if c[0] == "h200-gemm-ws")
    assert cache[predictions.key(*gemm)]["tflops"] == simulate(*gemm[:3])["tflops"]
