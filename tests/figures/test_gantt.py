"""The per-role Gantt figure of a simulated timeline: a real PNG, one lane per role, window clipping, the CLI."""

import pytest
from matplotlib.colors import to_hex

from lapis.cli import main
from lapis.figures.gantt import gantt, lane_order, steady_state_window
from lapis.figures.palette import op_kind
from lapis.pipeline_sim.recorder import Event
from lapis.pipeline_sim.simulate import simulate

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
RUNS = [("h200-s3-two-consumers", "1x1x1024x128"), ("h200-gemm-ws", "1024x1024x1024")]


@pytest.fixture(scope="module", params=RUNS, ids=[s for s, _ in RUNS])
def events(request):
    schedule, shape = request.param
    return simulate(schedule, "h200", shape, {})["_events"]


def _bars(fig):
    ax = fig.axes[0]
    return [p for p in ax.patches if (p.get_gid() or "").startswith(("op:", "wait:"))]


def _is_png(path):
    data = path.read_bytes()
    return data[:8] == PNG_MAGIC and len(data) > 10_000


def test_png_is_written_and_valid(events, tmp_path):
    path = tmp_path / "g.png"
    gantt(events, str(path), title="t")
    assert path.exists() and _is_png(path)


def test_one_lane_per_role_producers_first_tma_last(events, tmp_path):
    fig = gantt(events, str(tmp_path / "g.png"))
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    roles = {e.role for e in events}
    assert set(labels) == roles and len(labels) == len(roles)
    top_down = labels[::-1]  # y ticks go bottom-up; the first role is drawn on top
    assert top_down == lane_order(roles)
    assert top_down[0] == "producer" and top_down[-1] == "tma"
    assert all(r.startswith("consumer") for r in top_down[1:-1])
    # every non-wait op of the run is drawn, in the lane of its role
    drawn = {tuple(p.get_gid().split(":", 2)[1:]) for p in _bars(fig) if p.get_gid().startswith("op:")}
    assert drawn == {(e.role, e.op) for e in events if e.kind != "wait"}


def test_waits_are_hatched_grey_behind_ops(events, tmp_path):
    fig = gantt(events, str(tmp_path / "g.png"))
    waits = [p for p in _bars(fig) if p.get_gid().startswith("wait:")]
    ops = [p for p in _bars(fig) if p.get_gid().startswith("op:")]
    assert waits and ops
    assert all(p.get_hatch() for p in waits) and not any(p.get_hatch() for p in ops)
    assert all(p.zorder < min(o.zorder for o in ops) for p in waits)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    # one entry per op kind, "kind: the op names it covers" (or the bare kind when it is the only name)
    kinds = {op_kind(e.op) for e in events if e.kind != "wait"}
    assert "wait" in legend and {t.split(":")[0] for t in legend} - {"wait"} == kinds
    for e in events:
        if e.kind != "wait":
            entry = next(t for t in legend if t.split(":")[0] == op_kind(e.op))
            assert entry == e.op or e.op in entry.split(": ", 1)[1] or " ops (" in entry


def test_window_clips_bars(events, tmp_path):
    full = gantt(events, str(tmp_path / "full.png"))
    t0, t1 = steady_state_window(events)
    start, end = min(e.start_ns for e in events), max(e.end_ns for e in events)
    assert start < t0 < t1 < end
    path = tmp_path / "win.png"
    win = gantt(events, str(path), window_ns=(t0, t1))
    assert _is_png(path)
    bars = _bars(win)
    assert 0 < len(bars) < len(_bars(full))
    min_w = (t1 - t0) * 0.003
    for p in bars:  # every bar lies inside the window (µs on the axis)
        assert p.get_x() >= t0 / 1e3 - 1e-9 and p.get_x() + p.get_width() <= (t1 + min_w) / 1e3 + 1e-9
    # exactly the ops overlapping the window are drawn
    inside = [e for e in events if e.kind != "wait"
              and ((e.start_ns < t1 and e.end_ns > t0) if e.end_ns > e.start_ns else t0 <= e.start_ns <= t1)]
    assert len([p for p in bars if p.get_gid().startswith("op:")]) == len(inside)
    # the lanes stay those of the whole run, even for roles idle in the window
    assert {t.get_text() for t in win.axes[0].get_yticklabels()} == {e.role for e in events}
    assert win.axes[0].get_xlim()[0] == pytest.approx(t0 / 1e3)


def test_steady_state_window_covers_three_middle_k_iterations():
    # one consumer, K iterations 0..8 of 100 ns each starting at 50 ns; a producer running ahead
    evs = [Event("consumer0", "mma", 50 + 100 * k, 150 + 100 * k, k_index=k) for k in range(9)]
    evs += [Event("producer", "load", 100 * k, 100 * k + 10, k_index=k) for k in range(9)]
    evs += [Event("consumer0", "epilogue", 950, 1000)]
    assert steady_state_window(evs, iterations=3) == (350, 650)
    assert steady_state_window(evs, iterations=1) == (450, 550)
    # no K-indexed events: the middle third of the run
    assert steady_state_window([Event("a", "x", 0, 300), Event("b", "y", 0, 600)]) == (200, 400)


def test_zero_length_issues_are_still_visible(tmp_path):
    evs = [Event("producer", "issue TMA", 100, 100, k_index=0), Event("consumer0", "mma", 0, 1000, k_index=0),
           Event("tma", "load", 100, 900, kind="completion", k_index=0)]
    fig = gantt(evs, str(tmp_path / "z.png"))
    issue = [p for p in _bars(fig) if p.get_gid() == "op:producer:issue TMA"]
    assert len(issue) == 1 and issue[0].get_width() > 0
    # at least 2 pixels wide as drawn (dpi 110), and marked by a "v" in the op's colour above the producer lane
    fig.set_dpi(110)
    fig.canvas.draw()
    assert issue[0].get_window_extent().width >= 2.0
    marks = [c for c in fig.axes[0].collections if c.get_gid() == "instant:producer:issue TMA"]
    assert len(marks) == 1 and to_hex(marks[0].get_facecolor()[0]) == "#98df8a"
    (x, y), = marks[0].get_offsets()
    assert x == pytest.approx((100 + 1000 * 0.003 / 2) / 1e3) and y > 2 + 0.4  # producer lane is y = 2
    assert not [c for c in fig.axes[0].collections if c.get_gid() == "instant:consumer0:mma"]


def test_lanes_split_into_sub_rows_say_so():
    # two TMA loads in flight at once on the tma unit: 2 sub-rows, and the lane says why
    evs = [Event("producer", "issue TMA", 0, 0), Event("tma", "TMA K", 0, 600), Event("tma", "TMA V", 100, 700),
           Event("consumer0", "wgmma QK", 600, 900)]
    fig = gantt(evs)
    ax = fig.axes[0]
    notes = {t.get_gid(): t.get_text() for t in ax.texts if (t.get_gid() or "").startswith("subrows:")}
    assert notes == {"subrows:tma": "(2 overlapping ops: sub-rows)"}
    heights = {p.get_gid(): p.get_height() for p in _bars(fig)}
    assert heights["op:tma:TMA K"] == pytest.approx(0.4) and heights["op:consumer0:wgmma QK"] == pytest.approx(0.8)
    # the note sits beside the lane's own tick: the tma lane is the bottom one, y = 0
    note = next(t for t in ax.texts if t.get_gid() == "subrows:tma")
    assert note.xy == (0, 0)


def test_bad_window_is_refused(tmp_path):
    with pytest.raises(ValueError):
        gantt([Event("a", "x", 0, 10)], str(tmp_path / "x.png"), window_ns=(5, 5))


@pytest.mark.parametrize("schedule,shape", RUNS)
def test_cli_png(schedule, shape, tmp_path, capsys):
    path = tmp_path / "gantt.png"
    assert main(["simulate", "--schedule", schedule, "--shape", shape, "--figure", str(path)]) == 0
    assert str(path) in capsys.readouterr().out
    assert _is_png(path)


def test_cli_png_keeps_json_parseable_and_checks_the_path(tmp_path, capsys):
    import json
    path = tmp_path / "gantt.png"
    assert main(["simulate", "--schedule", "h200-gemm-ws", "--shape", "1024x1024x1024", "--json",
                 "--figure", str(path)]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["schedule"] == "h200-gemm-ws" and str(path) in out.err
    assert _is_png(path)
    assert main(["simulate", "--schedule", "h200-gemm-ws", "--shape", "1024x1024x1024",
                 "--figure", str(tmp_path / "no" / "g.png")]) == 2
    assert main(["simulate", "--schedule", "h200-gemm-ws", "--shape", "1024x1024x1024",
                 "--figure", str(tmp_path / "g.txt")]) == 2
