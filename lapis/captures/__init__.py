"""The capture store: reading captures and their manifests, the index of current captures, and provenance.

- store.py: the captures root, manifests, and the readers shared by every kind.
- attention.py, gemm.py: the timed kernel captures (times, timelines, clock probes).
- provenance.py: what a capture records about the GPU, driver, CUDA, command, commit and source blobs.
"""
