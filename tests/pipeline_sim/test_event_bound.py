"""The event bound of a --full run: over every SM simulated, estimated before the run from a pilot of one work
item, enforced while it runs, raised with --max-events; and the progress display of long runs."""

import pytest

from lapis.cli import main
from lapis.errors import ScheduleError
from lapis.model.profile import load_profile
from lapis.pipeline_sim import engine, recorder
from lapis.pipeline_sim.simulate import SCHEDULES, simulate

# h200-s8-persistent 1x16x4096x128 causal: 132 SMs as 48 distinct work lists, 69,572 events in all (each GEMM turn
# records its issue segments and its bar.sync hand-over), at most about 2,500 on any one SM.
S8, SHAPE, CAUSAL = "h200-s8-persistent", "1x16x4096x128", {"causal": 1}


def test_a_full_run_is_bounded_over_every_sm_not_per_sm(monkeypatch):
    monkeypatch.setattr(recorder, "MAX_EVENTS", 5000)  # every SM alone records fewer
    monkeypatch.setattr(recorder, "MAX_FULL_EVENTS", 5000, raising=False)
    with pytest.raises(ScheduleError, match=r"the --full run exceeds the simulator's event bound: got about 67,428 "
                                            r"tile-level events estimated over every SM simulated \(bound 5,000\); "
                                            r"fix: .*--max-events 67428"):
        simulate(S8, "h200", SHAPE, CAUSAL, full=True)
    assert simulate(S8, "h200", SHAPE, CAUSAL)["events"] < 5000  # the representative run stays under it


def test_max_events_raises_the_bound_for_one_run(monkeypatch):
    monkeypatch.setattr(recorder, "MAX_FULL_EVENTS", 5000, raising=False)
    r = simulate(S8, "h200", SHAPE, CAUSAL, full=True, max_events=70_000)
    assert r["grid"]["work_lists"] == 48


def test_the_in_run_bound_counts_every_sm():
    s, p = SCHEDULES[S8], load_profile("h200")
    with pytest.raises(ScheduleError, match="more than 20,000 tile-level events in the whole run"):
        engine.run(s, p, s.parse_shape(SHAPE), CAUSAL, full=True, max_events=20_000)
    # 69,572: s8's two Q slots' empty barriers (one wait a work item), the GEMM turns' issue and hand-over count
    # too, and the waits the softmax costs from SASS leave
    assert engine.run(s, p, s.parse_shape(SHAPE), CAUSAL, full=True)["events_total"] == 69_572


@pytest.mark.parametrize("name, gpu, shape, params", [
    (S8, "h200", SHAPE, CAUSAL), ("b200-k14-persistent", "b200", "2x16x4096x128", {}),
    ("h200-gemm-ws", "h200", "4096x4096x4096", {})])
def test_the_estimate_is_within_a_quarter_of_the_events_recorded(name, gpu, shape, params):
    s, p = SCHEDULES[name], load_profile(gpu)
    est = engine.estimate_events(s, p, s.parse_shape(shape), params)
    total = engine.run(s, p, s.parse_shape(shape), params, full=True)["events_total"]
    assert 0.75 * total <= est <= 1.25 * total, (est, total)


def test_the_cli_names_the_flag_and_takes_it(monkeypatch, capsys):
    monkeypatch.setattr(recorder, "MAX_FULL_EVENTS", 5000, raising=False)
    args = ["simulate", "--schedule", S8, "--shape", SHAPE, "--causal", "--full"]
    assert main(args) == 2
    assert "raise the bound with --max-events 67428" in capsys.readouterr().err
    assert main(args + ["--max-events", "70000", "--json"]) == 0


def test_progress_is_off_for_json_and_for_a_pipe(monkeypatch):
    import lapis.cli.simulate as cli
    seen = []

    def fake(*a, **kw):
        seen.append(kw["progress"])
        raise ScheduleError("stop", 0, "-")

    monkeypatch.setattr(cli, "simulate", fake)
    base = ["simulate", "--schedule", S8, "--shape", SHAPE]
    main(base)  # stdout is captured by pytest: not a terminal
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    main(base + ["--json"])
    main(base)
    assert seen[:2] == [None, None] and isinstance(seen[2], cli.RunProgress)


def test_the_progress_bar_shows_the_events_of_the_estimate_after_its_delay():
    from lapis.cli.simulate import RunProgress
    late = RunProgress(after_s=3600)
    late(10, 100)
    assert late.bar is None
    bar = RunProgress(after_s=0)
    bar(10, 100)
    bar(40, 100)
    task = bar.bar.tasks[0]
    bar.close()
    assert (task.completed, task.total) == (40, 100)


def test_a_huge_shape_is_refused_by_the_schedules_own_events_per_item(monkeypatch):
    """100000 x 128 heads of one 128-row Q tile: 96,970 items on the busiest SM, which the floor of 2 events per
    K/V tile let through (193,940); s9 records about 26 per item, so it is refused before any work list is built."""
    from lapis.pipeline_sim.schedules import attention_h200
    real = attention_h200.kv_units_per_sm

    def units(heads, *a):  # the one-head pilots build theirs
        return pytest.fail("the 12.8M-head work list was built") if heads > 1 else real(heads, *a)
    monkeypatch.setattr(attention_h200, "kv_units_per_sm", units)
    with pytest.raises(ScheduleError, match=r"the run exceeds the simulator's event bound: got at least "
                                            r"2,[0-9]{3},[0-9]{3} tile-level events"):
        simulate("h200-s9-tuned", "h200", "100000x128x128x128")


def test_the_per_item_count_refuses_what_would_overrun_and_runs_what_fits(monkeypatch):
    monkeypatch.setattr(recorder, "MAX_EVENTS", 3000)
    # 2000 x 16 one-tile items: 243 on the busiest SM; the floor says 486, s9 records about 21 per item
    with pytest.raises(ScheduleError, match="got at least [0-9,]+ tile-level events on the busiest SM"):
        simulate("h200-s9-tuned", "h200", "2000x16x128x128")  # refused before the run, not by its in-run bound
    # 1x16x4096x128 causal: the pilot fit allows it, and the run records under 3000 on its SM
    assert simulate(S8, "h200", SHAPE, CAUSAL)["events"] < 3000


def test_the_pilot_estimate_stays_a_lower_bound_with_several_q_tiles_per_cta():
    """1000 x 128 heads of one 128-row Q tile with q_tiles_per_cta 4: the run records 34,918 events on its SM.
    Pilots of a four-Q-tile item fitted a per-K/V-tile slope four Q tiles steep and said at least 56,260, refusing
    a run that fits; pilots of one Q tile say at least 28,130."""
    prm = {"q_tiles_per_cta": 4}
    assert simulate("h200-s9-tuned", "h200", "1000x128x128x128", prm, max_events=40_000)["events"] == 34_918
    with pytest.raises(ScheduleError, match="got at least 28,130 tile-level events"):
        simulate("h200-s9-tuned", "h200", "1000x128x128x128", prm, max_events=20_000)
