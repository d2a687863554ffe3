"""Footprint, traffic and Roller's micro-performance model (shared by Roller and Welder)."""

from compiler.cost.analysis import TileAnalysis
from compiler.cost.banks import conflict_ways, row_padding
from compiler.cost.model import Estimate, estimate
from compiler.cost.resources import TileResources, resources, violations
from compiler.cost.tiling import Tiling

__all__ = ["Estimate", "TileAnalysis", "TileResources", "Tiling", "conflict_ways", "estimate",
           "resources", "row_padding", "violations"]
