"""A step reporter any PyTorch training loop calls once per optimizer step.

    reporter = StepReporter("examples/llama3-8b-8xh100.yaml", rank=rank, port=9464 + local_rank)
    for batch in data:
        ...                                     # forward, backward, optimizer.step()
        reporter.step(tokens=reporter.tokens_per_step, loss=loss.item())
    reporter.close()

Each call measures the wall time since the previous one (the first call only starts the clock,
so a first step that compiles or warms up is not taken for a step time; ``start()`` starts it
earlier) and exports, next to the plan gauges of the scenario's estimate: the step seconds of
this rank, the step count, the time of the last step, tokens/s and MFU. On a CUDA device it
also exports the caching allocator's peaks (kinds ``allocated`` and ``reserved``) and, when NVML
is available, the device's used memory (kind ``device``, what nvidia-smi shows).

torch is never imported here: a training loop has imported it already, and a process without
it has no CUDA memory to report (this keeps the reporter usable, and cheap, on CPU).
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

from workbench.monitor.exporter import Endpoint
from workbench.monitor.metrics import MetricSet


@dataclass(frozen=True)
class StepRecord:
    """What one ``step()`` exported."""

    seconds: float              # wall time since the previous call
    tokens_per_s: float
    mfu: float                  # model FLOPs / (seconds x GPUs x peak FLOP/s)
    memory: dict                # kind -> bytes (empty on CPU)


class StepReporter:
    """Export one rank's steps against the scenario's plan (see the module docstring).

    ``scenario``: a validated ``Scenario`` or the path of a scenario file. ``port``: None keeps
    the series in ``metrics`` only (a caller serving them itself), an int serves them at
    ``http://host:port/metrics`` (0 = a free port; one port per process, e.g. base +
    LOCAL_RANK). ``synchronize``: on CUDA, wait for the device before reading the clock, so the
    step time is the GPU's and not how far ahead the host has queued kernels.
    """

    def __init__(self, scenario, rank: int = 0, port: int | None = None,
                 host: str = "127.0.0.1", metrics: MetricSet | None = None,
                 synchronize: bool = True) -> None:
        from workbench.estimate import estimate
        from workbench.estimate.time.kernels import peak_flops
        from workbench.estimate.model.flops import model_flops_per_step

        if isinstance(scenario, (str, os.PathLike)):
            from workbench.scenario import load_scenario
            scenario = load_scenario(scenario)
        self.scenario = scenario
        self.rank = rank
        self.metrics = metrics if metrics is not None else MetricSet()
        self.plan = estimate(scenario)
        self.metrics.set_plan(self.plan)
        tr, hw = scenario.training, scenario.hardware
        self.tokens_per_step = tr.seq_len * tr.global_batch
        # The estimator's own MFU terms (workbench.estimate.run.run_level.estimate_run):
        # workbench.estimate.model.flops.model_flops_per_step is the model FLOPs of one step of
        # seq_len x global_batch tokens, so per token it is that over the step's tokens (a
        # step with fewer tokens, e.g. the last partial batch, scales with its count);
        # workbench.estimate.time.kernels.peak_flops is one GPU's dense peak at the precision.
        self._flops_per_token = (model_flops_per_step(scenario.model, tr.seq_len, tr.global_batch, tr)
                                 / self.tokens_per_step)
        self._peak_all = peak_flops(hw.gpu, tr.precision) * hw.world
        self._synchronize = synchronize
        self._last: float | None = None
        self._cuda = None          # torch.cuda when a CUDA device is in use, False when not
        self._telemetry = None
        self._telemetry_tried = False
        self._endpoint = Endpoint(self.metrics, host, port, option="port") if port is not None \
            else None

    @property
    def url(self) -> str | None:
        """The scrape URL, or None without an endpoint."""
        return self._endpoint.url if self._endpoint is not None else None

    def _cuda_module(self):
        """torch.cuda when this process trains on a CUDA device, else None (decided once)."""
        if self._cuda is None:
            torch = sys.modules.get("torch")    # only if the training loop imported it
            if torch is None:
                return None                     # ask again: torch may be imported later
            self._cuda = torch.cuda if torch.cuda.is_available() else False
        return self._cuda or None

    def _clock(self) -> float:
        cuda = self._cuda_module()
        if cuda is not None and self._synchronize:
            cuda.synchronize()
        return time.perf_counter()

    def start(self) -> None:
        """Start the clock now (otherwise the first ``step()`` does)."""
        self._last = self._clock()

    def _gpu_memory(self) -> dict:
        """Allocator peaks and device memory of this process's GPU; {} without CUDA."""
        cuda = self._cuda_module()
        if cuda is None:
            return {}
        dev = cuda.current_device()
        # peaks since the start (or the loop's own torch.cuda.reset_peak_memory_stats): not
        # reset here, so a loop that reads them itself sees the same figures
        memory = {"allocated": cuda.max_memory_allocated(dev),
                  "reserved": cuda.max_memory_reserved(dev)}
        if not self._telemetry_tried:
            from workbench.monitor.nvml import open_telemetry

            self._telemetry_tried = True
            self._telemetry, reason = open_telemetry()
            if self._telemetry is None:
                print(f"GPU telemetry off: {reason}", file=sys.stderr, flush=True)
        if self._telemetry is not None:
            # by UUID: under CUDA_VISIBLE_DEVICES the CUDA index is not NVML's index
            uuid = getattr(cuda.get_device_properties(dev), "uuid", None)
            uuid = None if uuid is None else str(uuid)
            if uuid is not None and not uuid.startswith("GPU-"):
                uuid = "GPU-" + uuid
            used = self._telemetry.memory_used(index=None if uuid else dev, uuid=uuid)
            if used is not None:
                memory["device"] = used
        return memory

    def step(self, tokens: int, loss: float | None = None) -> StepRecord | None:
        """One optimizer step finished, of ``tokens`` tokens over all ranks (normally
        ``tokens_per_step``). Returns what was exported, or None on the first call (which only
        starts the clock)."""
        if tokens < 0:
            raise ValueError(f"tokens: must be >= 0 (got {tokens!r})")
        now = self._clock()
        if self._last is None:
            self._last = now
            return None
        seconds, self._last = now - self._last, now
        memory = self._gpu_memory()
        self.metrics.record_step(self.rank, seconds, time.time(), memory=memory, loss=loss)
        if seconds <= 0:             # a clock that did not move: no rate to report
            return StepRecord(seconds, float("nan"), float("nan"), memory)
        tokens_per_s = tokens / seconds
        mfu = tokens * self._flops_per_token / (seconds * self._peak_all)
        self.metrics.set_throughput(tokens_per_s, mfu)
        return StepRecord(seconds, tokens_per_s, mfu, memory)

    def close(self) -> None:
        """Stop serving (if serving) and shut NVML down (if opened)."""
        if self._endpoint is not None:
            self._endpoint.close()
            self._endpoint = None
        if self._telemetry is not None:
            self._telemetry.close()
            self._telemetry = None

    def __enter__(self) -> "StepReporter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
