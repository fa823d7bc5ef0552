"""``torchrun`` launch of the workbench's own trial (``workbench.trial.torchrun_main``) on the
scenario's machines, with the environment NCCL and PyTorch's NCCL process group need.

Sources:
- torchrun's flags: ``torch.distributed.run.get_args_parser()`` (PyTorch 2.13; the tests
  parse the exported command with it); c10d rendezvous:
  https://docs.pytorch.org/docs/stable/elastic/run.html
- PyTorch's NCCL variables: ``torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp`` and
  ``FlightRecorder.hpp`` (in the wheel's ``torch/include``; the tests check the names there).
- NCCL's variables: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html
"""
from __future__ import annotations

from dataclasses import dataclass

from workbench.export.common import Expand, Source, layout_summary, model_label, shell_command
from workbench.scenario.types import Scenario

MASTER_PORT = 29500
TRIAL_MODULE = "workbench.trial.torchrun_main"
DEFAULT_STEPS = 3


@dataclass(frozen=True)
class EnvVar:
    """One exported environment variable and why it is set."""

    name: str
    value: str
    why: str

    def line(self) -> str:
        # quoted so a ${VAR:?...} placeholder with spaces survives
        return f'export {self.name}="{self.value}"  # {self.why}'


def nccl_env(s: Scenario) -> list[EnvVar]:
    """The environment NCCL and PyTorch's NCCL process group need for this machine."""
    hw = s.hardware
    env = [
        # ProcessGroupNCCL.hpp: TORCH_NCCL_ASYNC_ERROR_HANDLING (ErrorHandlingMode 3 = SkipCleanUp,
        # the current default): a failed or timed-out collective aborts the communicator and
        # raises, so the rank exits and torchrun sees it instead of hanging.
        EnvVar("TORCH_NCCL_ASYNC_ERROR_HANDLING", "3",
               "abort the communicator and raise on a failed/timed-out collective"),
        # ProcessGroupNCCL.hpp: TORCH_NCCL_DUMP_ON_TIMEOUT needs the flight recorder
        # (FlightRecorder.hpp reads TORCH_FR_BUFFER_SIZE, formerly TORCH_NCCL_TRACE_BUFFER_SIZE).
        EnvVar("TORCH_NCCL_DUMP_ON_TIMEOUT", "1",
               "dump the last collectives of every rank when the watchdog times out"),
        EnvVar("TORCH_FR_BUFFER_SIZE", "2000", "flight-recorder entries kept per rank"),
        EnvVar("NCCL_DEBUG", "WARN", "NCCL prints warnings and errors only"),
    ]
    if hw.nodes == 1:
        return env
    link, nics = hw.inter_node.link, hw.inter_node.nics_per_node
    # NCCL_SOCKET_IFNAME: the interface for NCCL's bootstrap (and its data when no RDMA). It
    # differs per cluster, so the script stops (${VAR:?}) until someone sets it.
    env.append(EnvVar("NCCL_SOCKET_IFNAME",
                      "${NCCL_SOCKET_IFNAME:?set to the interface the nodes reach each other on, "
                      "e.g. eth0 or =ens1f0}",
                      "NCCL bootstrap interface (placeholder: set it before running)"))
    if link.rdma:
        # NCCL_IB_HCA: the HCAs NCCL's IB-verbs transport may use (InfiniBand and RoCE both go
        # through it). "mlx5" is a prefix match; list the GPU-facing ports to skip storage ones.
        env.append(EnvVar("NCCL_IB_HCA", "${NCCL_IB_HCA:-mlx5}",
                          f"{nics} RDMA NIC{'s' if nics > 1 else ''} per node ({link.name}); list "
                          "the GPU-facing ports, e.g. =mlx5_0,mlx5_1"))
        if "roce" in link.name.lower():
            # RoCE v2 needs the GID of the routable (IPv4/v6) entry; 3 is common, show_gids tells.
            env.append(EnvVar("NCCL_IB_GID_INDEX", "${NCCL_IB_GID_INDEX:-3}",
                              "RoCE v2 GID index (check with show_gids)"))
    else:
        # No RDMA NIC: keep NCCL from probing verbs devices; it uses TCP sockets.
        env.append(EnvVar("NCCL_IB_DISABLE", "1",
                          f"{link.name}: no RDMA, NCCL uses TCP sockets"))
    return env


def master_addr_line(s: Scenario) -> str:
    """``export MASTER_ADDR=...``: localhost on one node; across nodes a placeholder that stops
    the script until the first node's address is set (a wrong default would hang the others)."""
    if s.hardware.nodes > 1:
        return 'export MASTER_ADDR="${MASTER_ADDR:?set to the first node address}"'
    return 'export MASTER_ADDR="${MASTER_ADDR:-localhost}"'


def torchrun_args(s: Scenario, source: Source = Source(), *, rdzv_id: str = "workbench-trial",
                  steps: int = DEFAULT_STEPS) -> list[str]:
    """``torchrun ... -m workbench.trial.torchrun_main SCENARIO ...`` as an argument list.

    One torchrun per node (``--nnodes`` = nodes, ``--nproc-per-node`` = GPUs per node), c10d
    rendezvous at ``$MASTER_ADDR:29500``; world size is then the layout's dp*tp*pp*cp, which
    ``torchrun_main`` requires. The trial runs with NCCL, one GPU per rank.
    """
    hw = s.hardware
    return ["torchrun",
            f"--nnodes={hw.nodes}",
            f"--nproc-per-node={hw.gpus_per_node}",
            "--rdzv-backend=c10d",
            Expand(f"--rdzv-endpoint=$MASTER_ADDR:{MASTER_PORT}"),
            (Expand if isinstance(rdzv_id, Expand) else str)(f"--rdzv-id={rdzv_id}"),
            "--max-restarts=0",   # a failed rank ends the trial: the workbench reports it
            "-m", TRIAL_MODULE,
            *source.args(), "--steps", str(steps), "--backend", "nccl"]


def to_torchrun(s: Scenario, source: Source = Source()) -> str:
    """The environment and the torchrun command that run the scenario's trial on its machines."""
    hw = s.hardware
    lines = [
        f"# torchrun launch of the workbench trial: {model_label(s)}, {layout_summary(s)}",
        "# (the trial trains a scaled-down model of the same family with this layout).",
    ]
    if hw.nodes > 1:
        lines.append(f"# Run the same command on each of the {hw.nodes} nodes; MASTER_ADDR is "
                     f"the first node's address (c10d rendezvous on port {MASTER_PORT}).")
    lines.append(master_addr_line(s))
    lines += [e.line() for e in nccl_env(s)]
    lines.append(shell_command(torchrun_args(s, source)))
    return "\n".join(lines) + "\n"
