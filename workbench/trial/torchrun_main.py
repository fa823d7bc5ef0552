"""The trial entry point under ``torchrun`` (one machine or many, c10d rendezvous):

    torchrun --nnodes=2 --nproc-per-node=4 --rdzv-backend=c10d --rdzv-endpoint=HOST:PORT \\
        -m workbench.trial.torchrun_main SCENARIO [--steps K] [--set key=value ...]

Every rank runs the same worker as a local trial and prints its events as JSON lines
(``{"type": "step", "rank": ...}``) on stdout; the world size is torchrun's and must equal the
layout's dp x tp x pp x cp. A rank dies with its torchrun agent (``die_with_parent``), even one
killed with SIGKILL.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from workbench.errors import ScenarioError
from workbench.process_runner import die_with_parent


class _Printer:
    """A queue-like sink that prints events as JSON lines (heartbeats are dropped)."""

    def put(self, event: dict) -> None:
        if event.get("type") != "heartbeat":
            # One write per line: the ranks of an agent share its stdout, and a pipe keeps a
            # write of up to PIPE_BUF (4 KiB) bytes whole (print's two writes interleave).
            line = json.dumps(event, default=str, separators=(",", ":")) + "\n"
            sys.stdout.flush()
            os.write(sys.stdout.fileno(), line.encode())

    def close(self) -> None:
        pass

    def join_thread(self) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    from workbench.scenario import load_scenario
    from workbench.trial import prepare
    from workbench.trial.worker import WorkerArgs, run

    ap = argparse.ArgumentParser(prog="workbench.trial.torchrun_main")
    ap.add_argument("scenario")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--backend", default="gloo", choices=["gloo", "nccl"])
    args = ap.parse_args(argv)
    world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    try:
        trial = prepare(load_scenario(args.scenario, args.set), world_size=world)
    except ScenarioError as exc:
        print(f"workbench: invalid trial: {exc.one_line()}", file=sys.stderr)
        return 2
    run(WorkerArgs(rank=rank, world=world, port=0, scenario=trial, steps=args.steps,
                   backend=args.backend, timeout_s=60, init_method="env://"), _Printer())
    return 0


if __name__ == "__main__":
    # torchrun does not name its agent to the ranks: the parent now is the agent (the window
    # before this line, interpreter start-up, stays open)
    die_with_parent(os.getppid())
    sys.exit(main())
