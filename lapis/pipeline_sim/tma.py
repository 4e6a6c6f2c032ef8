"""The SM's TMA engine: the copies a producer commits, from issue to the bytes landing on their mbarrier.

A copy of `nbytes` queues for the SM's load path (one copy moves at a time), holds it for nbytes / the SM's load
bandwidth share (B/ns, lapis.pipeline_sim.grid: `reuse` is how many loads each HBM byte serves through L2; or
the schedule's own `load_ns`), then
lands `latency_ns` later and completes its bytes on the pipeline slot's full barrier (PTX ISA
cp.async.bulk.tensor, .mbarrier::complete_tx::bytes). Two ways to draw it on the timeline:
- "span": one completion event per copy, from its issue to its landing (the GEMM's timelines);
- "transfer": the queueing, if any, as "wait <unit>" and the transfer itself as the op (the attention timelines).
"""

from __future__ import annotations

from lapis.errors import ScheduleError
from lapis.pipeline_sim.mbarrier import check_bulk_bytes

STYLES = ("span", "transfer")


class TmaEngine:
    """The TMA copies of one SM (or one CTA slot): role `role` on the timeline, unit `unit` of the Context."""

    def __init__(self, ctx, role: str = "tma", unit: str = "tma", style: str = "span", reuse: float = 1.0,
                 latency_ns: float | None = None, load_ns=None):
        self.ctx, self.role, self.unit, self.style, self.reuse = ctx, role, unit, style, reuse
        # a copy's ns on the load path, from its bytes, when it takes the path: at the grid's equal share unless
        # the schedule passes its own load_ns
        self.load_ns = load_ns or (lambda nbytes: nbytes / ctx.grid.share(self.reuse))
        self.latency_ns = ctx.p["tma_latency_ns"] if latency_ns is None else latency_ns
        if style not in STYLES:
            raise ScheduleError("a TMA engine draws its copies as one of " + ", ".join(STYLES), repr(style),
                                "pass style='span' or style='transfer'")

    def copy(self, pipe, st, nbytes: int, token, issue, op: str | None = None, writer: str | None = None, **kw):
        """Start the copy of a committed slot (PipelineState `st`) as a process; it calls pipe.landed.
        ScheduleError unless nbytes is a multiple of 16 B (PTX ISA cp.async.bulk)."""
        check_bulk_bytes(nbytes, f"TMA copy into {pipe.buffer}")
        op = op or f"TMA {pipe.buffer}"
        writer = writer or f"{self.role} {pipe.buffer} {token}"
        run = self._span if self.style == "span" else self._transfer
        return self.ctx.child(run(pipe, st, nbytes, token, issue, op, writer, kw))

    def _span(self, pipe, st, nbytes, token, issue, op, writer, kw):
        ctx, start = self.ctx, self.ctx.now
        with ctx.units[self.unit].request() as req:
            yield req
            ns = self.load_ns(nbytes)
            ctx.busy[self.unit] += ns
            yield ctx.env.timeout(ns)
        yield ctx.env.timeout(self.latency_ns)
        ev = ctx.record(self.role, op, start, kind="completion", **kw)
        pipe.landed(st, nbytes, token, issue, writer, event=ev.id)

    def _transfer(self, pipe, st, nbytes, token, issue, op, writer, kw):
        ctx = self.ctx
        yield from ctx.occupy(self.unit, lambda: self.load_ns(nbytes), self.role, op, **kw)
        event = ctx.rec.last_id(self.role)  # this copy's transfer: a later copy may record one before this lands
        yield ctx.env.timeout(self.latency_ns)
        pipe.landed(st, nbytes, token, issue, writer, event=event)
