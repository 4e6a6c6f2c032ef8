"""What lapis defines once: hardware limits (hardware) and the kernel variants (attention, gemm), from which
generate writes the kernels' instantiation lists.

The catalog imports nothing above lapis.errors, so every layer can read it.
"""
