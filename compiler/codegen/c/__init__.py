"""The C backend's renderer: kernels for a CPU (kernel.py and the shapes it picks among:
gemm, direct, softmax, rows, stage...), the OpenMP entry point (entry.py) and weight
prepacking (prepack.py)."""
