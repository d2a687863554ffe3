"""The CUDA backend's renderer: one `extern "C" __global__` kernel per Compute
(kernel.py picks the shape: gemm, rowreduce, rows, general) and the launch table."""
