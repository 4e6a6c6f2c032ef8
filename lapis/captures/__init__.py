"""The capture store: reading the timed kernel captures, their timelines, and provenance.

- attention.py, gemm.py: the timed kernel captures (manifests, times, timelines, clock probes).
- timeline.py: the timeline wire format of lapis/gpu/kernels/harness.cuh and its decoding into events.
- provenance.py: what a capture records about the GPU, driver, CUDA, command, commit and source blobs.
The captures root and the layout captures' manifests are read by lapis.validate.layouts (captures_root).
"""
