"""The stages of a compilation, in order: what progress reports and job records name.

A leaf module, so that the web process (the dashboard's job pages) can read them without
importing the compiler pipeline and, with it, onnx, the frontend and the scheduler.
"""

STAGES = ("load", "lower", "partition", "schedule", "codegen", "build", "validate", "package")
