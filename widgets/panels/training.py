"""Training: sequence length, micro and global batch, tokens, precision, recompute, optimizer,
offload, attention kernel."""
from __future__ import annotations

import ipywidgets as w

from widgets.panels.base import Panel, dropdown, float_box, int_box
from workbench.scenario.types import ATTENTION_KERNELS, OFFLOAD, OPTIMIZERS, PRECISIONS, RECOMPUTE


class TrainingPanel(Panel):
    title = "Training"

    def __init__(self, state) -> None:
        super().__init__(state)
        self.seq_len = int_box("Sequence length", 1, 10_000_000)
        self.micro_batch = int_box("Micro-batch", 1, 100_000)
        self.global_batch = int_box("Global batch", 1, 100_000_000)
        self.tokens = float_box("Tokens to train", 1, 1e16)
        self.precision = dropdown("Precision", list(PRECISIONS))
        self.recompute = dropdown("Recompute", list(RECOMPUTE))
        self.optimizer = dropdown("Optimizer", list(OPTIMIZERS))
        self.offload = dropdown("Offload", list(OFFLOAD))
        self.attention = dropdown("Attention kernel", list(ATTENTION_KERNELS))
        self.box = w.VBox([
            w.HTML("<b>Training</b>"),
            self.bind("training.seq_len", self.seq_len),
            self.bind("training.micro_batch", self.micro_batch),
            self.bind("training.global_batch", self.global_batch),
            self.bind("training.tokens", self.tokens, to_doc=float),
            self.bind("training.precision", self.precision),
            self.bind("training.recompute", self.recompute),
            self.bind("training.optimizer", self.optimizer),
            self.bind("training.offload", self.offload),
            self.bind("training.attention", self.attention),
        ])
        self.refresh()
