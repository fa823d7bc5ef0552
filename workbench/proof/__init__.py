"""Proof: trials compared with the estimate, row by row, and the standard matrix of them.

``compare`` (one trial) and ``run_matrix`` (the standard matrix) import torch only when a trial
runs; the rows are plain data (``Row``), rendered by ``workbench.proof.render``.
"""
from workbench.proof.compare import Row, compare
from workbench.proof.matrix import MATRIX, QUICK, Case, Outcome, run_matrix

__all__ = ["Case", "MATRIX", "Outcome", "QUICK", "Row", "compare", "run_matrix"]
