"""Hardware targets: memory levels, units, presets, detection of this machine."""

from compiler.target.base import MemoryLevel, Target
from compiler.target.cpu import detect_cpu
from compiler.target.custom import load_target_file
from compiler.target.measure import measure_cpu
from compiler.target.registry import get_target, list_targets, target_aliases

__all__ = ["MemoryLevel", "Target", "detect_cpu", "get_target", "list_targets",
           "load_target_file", "measure_cpu", "target_aliases"]
