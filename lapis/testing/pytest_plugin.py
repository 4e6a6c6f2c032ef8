"""pytest plugin: run a suite's `lapis_gpu` property tests against the GPU oracles of lapis.gpu.oracle.

Registered as the `lapis` pytest11 entry point (pyproject.toml); without an install, load it with
`-p lapis.testing.pytest_plugin` (not both: pytest refuses a plugin registered twice). It adds:

- the marker `lapis_gpu`: the test needs the oracle on a GPU (named so as not to clash with a suite's own `gpu`);
- the option `--lapis-gpu`: run the `lapis_gpu` tests. Without it, or without a usable device (the oracle child
  answers a ping from a compute capability 9.x device), they are skipped with the reason;
- the session-scoped fixture `lapis_oracle`: one lapis.gpu.oracle.Oracle for the whole run, closed at the end.

With LAPIS_ORACLE_BACKEND=model the oracle answers from lapis's own model: the `lapis_gpu` tests then run on any
machine (a check of the suite itself, not of the hardware).
"""

from __future__ import annotations

import pytest

from lapis.gpu.oracle import Oracle, OracleFault

MARKER = "lapis_gpu"
OPTION = "--lapis-gpu"


def pytest_addoption(parser):
    parser.getgroup("lapis").addoption(
        OPTION, action="store_true", default=False,
        help="run tests marked lapis_gpu against the GPU oracles (lapis.gpu.oracle; LAPIS_ORACLE_BACKEND=model "
             "answers from lapis's model instead)")


def pytest_configure(config):
    config.addinivalue_line("markers", f"{MARKER}: property test checked against the GPU oracles of lapis "
                                       f"(runs with {OPTION} and a usable sm_90 device)")


def _device_problem(config) -> str | None:
    """Why the oracle cannot run here (None when it can); asked once per session."""
    cached = getattr(config, "_lapis_device_problem", False)
    if cached is not False:
        return cached
    oracle = Oracle(timeout_s=60)
    try:
        pong = oracle.ping()
    finally:
        oracle.close()
    if isinstance(pong, OracleFault):
        last = (pong.detail.strip().splitlines() or [""])[-1]
        problem = (f"no usable GPU for the lapis oracle: {pong.error}: {last} (on a CPU machine, "
                   "LAPIS_ORACLE_BACKEND=model runs these tests against lapis's own model)")
    elif not str(pong.get("cc", "")).startswith("9."):
        problem = f"the lapis oracle kernels need sm_90a; the device is {pong.get('device')} (cc {pong.get('cc')})"
    else:
        problem = None
    config._lapis_device_problem = problem
    return problem


def pytest_collection_modifyitems(config, items):
    marked = [i for i in items if i.get_closest_marker(MARKER)]
    if not marked:
        return
    if not config.getoption(OPTION):
        reason = f"lapis_gpu test: pass {OPTION} to run it against the GPU oracle"
    else:
        reason = _device_problem(config)
    if reason:
        for item in marked:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def lapis_oracle():
    """The session's lapis.gpu.oracle.Oracle (backend from LAPIS_ORACLE_BACKEND, default gpu)."""
    oracle = Oracle()
    yield oracle
    oracle.close()
