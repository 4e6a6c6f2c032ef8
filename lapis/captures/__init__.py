"""The capture store: reading the timed kernel captures, their timelines, and provenance.

- store.py: the captures root, manifests, the index as readers ask it, and timelines files (an .npz or its
  packed form); what every reader uses.
- manifest.py: capture.json, the one manifest schema, generated from a capture's own files.
- index.py: lapis/data/index.json (every capture by kind, the readers' order, the current capture of each
  kernel, the files removed from the tree) and the generator `python -m lapis.captures.index --write`.
- codec.py: the packed array format of the shipped timelines; pack.py re-encodes an .npz into it.
- attention.py, gemm.py: the timed kernel captures (times, timelines, clock probes).
- timeline.py: the timeline wire format and its decoding into events.
- user_timeline.py: timelines a user's kernel recorded with lapis_timeline.cuh (docs/timeline-format.md): the
  dumped buffer, checked, into events.
- proton.py: Triton Proton's intra-kernel (instrumentation-mode) Chrome traces, checked, into the same events.
- provenance.py: what a capture records about the GPU, driver, CUDA, command, commit and source blobs.
The captures root and the layout captures' manifests are read by lapis.validate.layouts (captures_root).
"""
