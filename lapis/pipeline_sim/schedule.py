"""A schedule: the roles of a warp-specialized kernel and what decides their timing, as one object.

`Schedule` holds what `lapis simulate` needs to run a kernel's mainloop in simulated time:
- name, description, the GPU profile and architecture it is written for (`gpu`, `arch`);
- `shape`: the problem's shape form, "gemm" (MxNxK) or "attention" (BxHxLxD, D the head dimension);
- `defaults`: every parameter with its default (`lapis simulate --param k=v` sets them); `flags`: the
  variant's switches, read by the roles and the cost model (`ctx.flags`);
- `resolve(p, dims, params) -> (prm, fit)`: the run's parameters and what it takes of the SM (smem bytes,
  registers, ...), raising lapis.errors.ScheduleError for a configuration the hardware cannot run;
- `work(p, dims, prm) -> per-SM work lists` (the work order); `work_cost` ranks them, the costliest SM is the
  representative one;
- `costs(p, dims, prm, flags) -> cost model`: what each op takes (ns), for the roles to ask;
- `launch(ctx)`: starts one SM's roles (top-level generator functions over a lapis.pipeline_sim.context.Context);
- `flops(dims, prm)` and `summary(per_sm, rep, dims, prm, cost) -> dict` for the report; `sm_fit(fit, work) -> fit`
  where what the representative SM runs depends on its work list (fewer CTAs than it keeps resident).

Built-in schedules register in lapis.pipeline_sim.schedules; a user's schedule is a `Schedule` in the user's own
file, named as `path/to/file.py:NAME` wherever a schedule name is taken (`lapis simulate --schedule`,
`lapis sweep --schedule`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lapis.errors import ScheduleError

SHAPES = {"gemm": "MxNxK", "attention": "BxHxLxD"}
_SHAPE_RULE = {"gemm": ("a GEMM shape is MxNxK", "e.g. --shape 8192x8192x8192"),
               "attention": ("an attention shape is BxHxLxD", "e.g. --shape 8x16x4096x128")}


@dataclass(frozen=True)
class Schedule:
    name: str
    description: str
    shape: str
    defaults: dict
    resolve: Callable = None
    work: Callable = None
    costs: Callable = None
    launch: Callable = None
    flops: Callable = None
    summary: Callable = None
    flags: dict = field(default_factory=dict)
    gpu: str = "h200"
    arch: str = "sm90"
    units: tuple = ("tensor", "tma")
    busy: tuple | None = None
    work_cost: Callable = len
    sm_fit: Callable | None = None  # (fit, work list) -> the fit on the representative SM, where its work decides it
    q_rows: int = 0  # attention: the most Q rows a work item takes where no parameter says (the event bound)
    races: str = "run"  # "run": one race log for the whole run; "slot": the schedule makes its own per CTA slot
    tuple_units: bool = False  # work items are tuples of tile counts (one per Q tile of a CTA): lapis.sweep.fast

    def __post_init__(self):
        if self.shape not in SHAPES:
            raise ScheduleError("a schedule's shape form is gemm (MxNxK) or attention (BxHxLxD)", repr(self.shape),
                                "pass shape='gemm' or shape='attention'")

    def parse_shape(self, text: str) -> tuple[int, ...]:
        """'MxNxK' or 'BxHxLxD' -> a tuple of ints, one per letter; ScheduleError otherwise."""
        rule, fix = _SHAPE_RULE[self.shape]
        try:
            dims = tuple(int(x) for x in text.lower().split("x"))
        except (ValueError, AttributeError):
            dims = ()
        if len(dims) != len(SHAPES[self.shape].split("x")):
            raise ScheduleError(rule, repr(text), fix)
        if self.shape == "gemm" and min(dims) < 1:
            raise ScheduleError("GEMM extents must be positive", text, "use M, N, K >= 1")
        return dims


REGISTRY: dict[str, Schedule] = {}


def register(*schedules: Schedule) -> None:
    """Make schedules known by name (lapis simulate --list shows them)."""
    for s in schedules:
        REGISTRY[s.name] = s


def lookup(name: str | Schedule) -> Schedule:
    """A Schedule by registered name, or `path/to/file.py:NAME` (a Schedule in the user's file), or the
    Schedule itself. ScheduleError names what is wrong and what exists."""
    if isinstance(name, Schedule):
        return name
    if not isinstance(name, str):
        raise ScheduleError("a schedule is a name or path/to/file.py:NAME", repr(name), "see lapis simulate --list")
    if name in REGISTRY:
        return REGISTRY[name]
    path, sep, attr = name.rpartition(":")
    if sep and path.endswith(".py"):
        return from_file(Path(path), attr)
    raise ScheduleError("unknown schedule", repr(name), "see lapis simulate --list, or name your own as "
                        "path/to/file.py:NAME")


def from_file(path: Path, attr: str) -> Schedule:
    """The Schedule `attr` defined in the Python file `path` (run as a module of its own). ScheduleError when the
    file is missing or fails to import, or `attr` is not a Schedule in it (the fix lists the ones it defines)."""
    if not path.is_file():
        raise ScheduleError("a schedule file is a Python file that exists", str(path), "check the path")
    key = "lapis_user_schedule_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(key, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module  # dataclasses and pickling look the module up by name
    try:
        spec.loader.exec_module(module)
    except ScheduleError:
        raise
    except Exception as exc:
        del sys.modules[key]
        raise ScheduleError("a schedule file imports without error", f"{path}: {exc.__class__.__name__}: {exc}",
                            "run it with python to see the error") from None
    found = getattr(module, attr, None)
    if not isinstance(found, Schedule):
        names = sorted(k for k, v in vars(module).items() if isinstance(v, Schedule))
        what = (f"{path}'s {attr} is {repr(found)[:80]} ({type(found).__name__}), not a Schedule" if hasattr(module, attr)
                else f"{path} defines no name {attr!r}")
        fix = (f"name one of the Schedules the file defines: {', '.join(f'{path}:{n}' for n in names)}" if names
               else f"define one in the file ({attr or 'NAME'} = lapis.pipeline_sim.Schedule(...)) and name it "
                    "after the colon")
        raise ScheduleError("the NAME of path/to/file.py:NAME is a Schedule the file defines", what, fix)
    return found
