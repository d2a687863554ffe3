"""Hardware targets: memory levels, units, presets, detection of this machine.

Level names, outermost first, that the scheduler maps tiles onto:
CUDA "dram", "l2", "smem" (per SM), "reg" (register file per SM); CPU "dram",
"l3" (when present), "l2" and "l1" (per core). Shared levels (DRAM, GPU L2,
CPU L3) give the whole device's capacity, the others one unit's.
"""

from compiler.target.base import MemoryLevel, Target
from compiler.target.cpu import detect_cpu
from compiler.target.custom import load_target_file
from compiler.target.measure import measure_cpu
from compiler.target.registry import get_target, list_targets, target_aliases

__all__ = ["MemoryLevel", "Target", "detect_cpu", "get_target", "list_targets",
           "load_target_file", "measure_cpu", "target_aliases"]
