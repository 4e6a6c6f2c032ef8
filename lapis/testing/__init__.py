"""Testing aids for kernel engineers: Hypothesis strategies over lapis's layouts and a pytest plugin.

- strategies.py: Hypothesis strategies for canonical layouts, TMA tensor maps and loads, and wgmma (sm90) and
  tcgen05 (sm100) matrix descriptors, valid or deliberately broken.
- pytest_plugin.py: the `lapis_gpu` marker, the `--lapis-gpu` option and the session-scoped `lapis_oracle`
  fixture (lapis.gpu.oracle), registered as the `lapis` pytest11 entry point.

Nothing in lapis imports this package; it is for test suites.
"""
