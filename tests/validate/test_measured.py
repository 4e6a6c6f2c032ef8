"""lapis.validate.measured's pieces on hand-made events: the predicted view, the CTA compared, the iteration time
of a timeline that recorded every Nth iteration."""

from lapis.pipeline_sim.recorder import Event
from lapis.validate import measured


def ev(role, op, t0, t1, kind="issue", k=-1, item=0, cta=0, sm=0, i=0):
    return Event(role, op, t0, t1, sm, cta, item, k, kind, None, i)


def test_the_predicted_view_drops_units_and_joins_unit_waits_to_their_op():
    events = [ev("tma", "TMA A+B", 0, 50, "completion", 0, i=0), ev("c0", "wait full", 0, 50, "wait", 0, i=1),
              ev("c0", "wait tensor", 50, 80, "wait", 0, i=2), ev("c0", "wgmma", 80, 120, "issue", 0, i=3),
              ev("c0", "wait tensor", 200, 210, "wait", 1, i=4)]  # no op starts at 210: stays a wait
    got = [(e.role, e.op, e.start_ns, e.end_ns, e.kind) for e in measured.predicted_view(events, ("tma", "tensor"))]
    assert got == [("c0", "wait full", 0, 50, "wait"), ("c0", "wgmma", 50, 80, "issue"),
                   ("c0", "wgmma", 80, 120, "issue"), ("c0", "wait tensor", 200, 210, "wait")]


def test_the_cta_with_the_most_work_items_is_compared():
    events = [ev("p", "x", 0, 1, item=i, cta=3, sm=7) for i in range(2)] + \
             [ev("p", "x", 0, 1, item=i, cta=1, sm=2) for i in range(2)] + [ev("p", "x", 0, 1, cta=0)]
    assert measured.chosen_cta(events) == (1, 2)


def test_the_iteration_time_counts_the_k_indices_a_gap_spans():
    every = [ev("consumer", "mma", 100 * k, 100 * k + 50, k=k) for k in range(16)]
    every4 = [e for e in every if e.k_index % 4 == 0]
    assert measured.iteration_ns(every) == 100.0
    assert measured.iteration_ns(every4) == 100.0
    producer_only = [ev("producer", "tma", 100 * k, 100 * k, k=k) for k in range(16)]
    assert measured.iteration_ns(producer_only) is None


def test_role_times_keep_busy_waiting_and_queued_apart():
    # c0 over 0..100: waits 0-40 (wait full), queues for the tensor pipe 40-50, runs its wgmma 50-80 while it
    # also waits 60-90 (wait wgmma: only 80-90 counts as waiting), stores 90-100
    events = [ev("c0", "wait full", 0, 40, "wait"), ev("c0", "wait tensor", 40, 50, "wait"),
              ev("c0", "wgmma", 50, 80), ev("c0", "wait wgmma", 60, 90, "wait"), ev("c0", "store C", 90, 100),
              ev("p", "wait empty", 0, 100, "wait")]
    got = measured.role_times(events, ("tensor", "tma"))
    assert got["c0"] == dict(busy=0.4, waiting=0.5, queued=0.1, busy_ns=40)
    assert got["p"] == dict(busy=0.0, waiting=1.0, queued=0.0, busy_ns=0)
    # without units (a measured timeline) a "wait tensor" is a wait like any other
    assert measured.role_times(events)["c0"] == dict(busy=0.4, waiting=0.6, queued=0.0, busy_ns=40)
