"""What generated code and the runtimes agree on, in a leaf module both import: the C
entry point's ABI version and return codes, and the manifest key of a CUDA artifact's
launch table. (Loading an artifact must not import the code generators.)"""

# The C entry point (compiler/codegen/c/entry.py; checked by compiler/runtime/cpu.py).
ABI_VERSION = 2  # 2: tf_prepare
RUN_NULL_POINTER = 1  # tf_run / tf_prepare: a pointer it needs is null

# The manifest key under which a CUDA artifact lists its launches (codegen/cuda.launch_table).
MANIFEST_LAUNCHES = "cuda_launches"
