"""Bytes per logit the eager upcast loss holds, measured on this CPU: the check behind
``buffers.loss_per_logit`` for ``Engine.loss`` "upcast" (10 B at the loss's forward, 12 B at
its backward with the 16-bit logits freed before it, as the Hugging Face Trainer's
``compute_loss`` does; the saved fp32 log-probabilities, 4 B, are among them).

Each phase runs in its own process, whose peak resident set (``ru_maxrss``) less the one
before the loss is the loss's peak: PyTorch's CPU allocator hands large tensors back to the
OS, so the peak is the largest set of tensors alive at once.

    .venv/bin/python benchmarks/loss_memory_cpu.py
"""
from __future__ import annotations

import subprocess
import sys

TOKENS, VOCAB = 8192, 32768

CHILD = f"""
import resource, sys, torch, torch.nn.functional as F
torch.manual_seed(0)
n = {TOKENS} * {VOCAB}
def rss(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
h = torch.randn({TOKENS}, 256, dtype=torch.bfloat16)
w = torch.randn({VOCAB}, 256, dtype=torch.bfloat16, requires_grad=True)
y = torch.randint(0, {VOCAB}, ({TOKENS},))
base = rss()
logits = h @ w.t()                                   # the 16-bit logits
loss = F.cross_entropy(logits.float(), y)            # transformers ForCausalLMLoss: upcast, CE
if sys.argv[1] == "forward":
    print((rss() - base) / n)
    sys.exit()
del logits                                           # the Trainer keeps only the loss
loss.backward()
print((rss() - base) / n)
"""


def measure(phase: str) -> float:
    """Peak bytes per logit of the loss up to the end of ``phase`` (forward / backward)."""
    out = subprocess.run([sys.executable, "-c", CHILD, phase], capture_output=True, text=True,
                         timeout=600, check=True)
    return float(out.stdout.strip())


def main() -> int:
    fwd, bwd = measure("forward"), measure("backward")
    print(f"eager upcast cross-entropy, {TOKENS} tokens x {VOCAB} vocabulary, bf16 logits:")
    print(f"  forward  peak {fwd:5.2f} B per logit (model: 10 = 2 bf16 + 4 fp32 copy + 4 saved)")
    print(f"  backward peak {bwd:5.2f} B per logit (model: 12 = 4 saved + 4 + 4 fp32 gradients)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
