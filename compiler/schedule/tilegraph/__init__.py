"""Welder's tile-graph: operators connected at tile level, so that intermediates stay in a
fast memory level instead of crossing DRAM.

- registers.py: the register level. A producer is inlined into its consumers and an
  epilogue (bias, activation, residual) runs on a contraction's accumulator before the
  store: one kernel, the intermediate never written.
- rows.py: the cache level (the CPU's L1 / L2, the GPU's shared memory). Chains that share
  their leading axes as rows (softmax, layer norm) become one kernel that runs every
  member on a block of rows, the intermediates in on-chip scratch.
- rowtile.py: the tiling of such a group (rows per task), ranked by the cost model.
- attention.py: across two contractions. Scores, softmax and the product with V become one
  kernel that walks the keys in blocks with an online softmax (the scores stay on chip);
  broadcast.py lets it read GQA's shared heads by index instead of through their copies.
"""
