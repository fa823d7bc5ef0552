"""Hardware: GPU model and count, nodes, links, NICs, CPU, DDR grade/capacity/channels, NVMe."""
from __future__ import annotations

import ipywidgets as w

from widgets.panels.base import Panel, check, dropdown, float_box, int_box
from widgets.state import get_path
from workbench.catalog import CATALOGS

HOST_FIELDS = ("hardware.host.cpu", "hardware.host.memory", "hardware.host.memory_gb",
               "hardware.host.channels", "hardware.host.sockets")


def _choices(kind: str) -> list[tuple[str, str]]:
    return [(f"{rec.name} ({key})", key) for key, rec in CATALOGS[kind].items()]


def _gpu_choices() -> list[tuple[str, str]]:
    """The catalog's GPUs, then this machine's measured GPU profiles by name (the calibration
    folders: the page never takes a path). A profile measured on a CPU is no GPU: left out."""
    from workbench.hardware.gpu_profile import GpuProfile
    from workbench.hardware.locate import available
    from workbench.hardware.calibration import load_profile

    measured = []
    for name, path in available().items():
        try:
            if isinstance(load_profile(path), GpuProfile):
                measured.append((f"measured GPU: {name}", f"calibration:{name}"))
        except Exception:   # an unreadable profile is not offered
            continue
    return _choices("gpu") + measured


# links inside a node (GPU to GPU) and between nodes (network); the catalog names some
# twice ("nvlink" is "nvlink4"): each product once, under its first key
def is_network(key: str) -> bool:
    return not key.startswith(("nvlink", "pcie"))


def _link_choices(network: bool) -> list[tuple[str, str]]:
    seen, out = set(), []
    for key, rec in CATALOGS["link"].items():
        if is_network(key) != network or rec.name in seen:
            continue
        seen.add(rec.name)
        out.append((f"{rec.name} ({key})", key))
    return out


def refill_dp(state, world) -> dict:
    """Data parallelism fills whatever GPUs the other degrees leave (when they divide it); a
    GPU count the validator will refuse (0, text) changes nothing else."""
    if isinstance(world, bool) or not isinstance(world, int) or world < 1:
        return {}
    d = state.scenario.document["parallel"] if state.scenario else state.doc.get("parallel", {})
    rest = d.get("tp", 1) * d.get("pp", 1) * d.get("cp", 1)
    return {"parallel.dp": world // rest} if world % rest == 0 else {}


class HardwarePanel(Panel):
    title = "Hardware"

    def __init__(self, state) -> None:
        super().__init__(state)
        self.gpu = dropdown("GPU", _gpu_choices())
        self.gpus_per_node = int_box("GPUs per node", 1, 1024)
        self.nodes = int_box("Nodes", 1, 100_000)
        self.intra = dropdown("Intra-node link", _link_choices(network=False))
        self.inter = dropdown("Inter-node link", _link_choices(network=True))
        self.nics = int_box("NICs per node", 0, 64)
        # RDMA is a property of the inter-node link: the box switches between a link and its
        # RDMA sibling in the catalog (400gbe <-> 400gbe-rdma); InfiniBand is always RDMA
        # a machine that exists: the build checks are advice, not the answer
        self.owned = check("I own this machine (it exists)")
        self.owned.tooltip = ("Ticked: the box exists as given, so what a plan would fail "
                              "(PCIe lanes, power, cooling) is advice; unticked: it is being "
                              "planned, and a node that cannot be built is a No.")
        self.rdma = check("RDMA (GPUDirect)")
        self.rdma.observe(self._toggle_rdma, names="value")
        self.cpu = dropdown("CPU", [("not given", "")] + _choices("cpu"))
        self.ddr = dropdown("DDR grade", _choices("memory"))
        self.host_gb = float_box("Host memory (GiB)", 1, 1e7)
        self.channels = int_box("DDR channels", 1, 64)
        self.sockets = int_box("Sockets", 1, 8)
        self.drive = dropdown("NVMe drive", _choices("drive"))
        self.drives = int_box("NVMe drives", 0, 64)

        def gpn(v):
            return refill_dp(state, _times(v, self.current("hardware.nodes", 1)))

        def nodes(v):
            return refill_dp(state, _times(v, self.current("hardware.gpus_per_node", 1)))

        def host(path):
            # a host given in part takes no defaults from the default host's CPU: write the
            # host fields as shown, so the scenario keeps what the panel displays
            def fill(_v):
                return {p: self.current(p) for p in HOST_FIELDS
                        if p != path and get_path(state.doc, p) is None
                        and self.current(p) is not None}
            return fill

        self.box = w.VBox([
            w.HTML("<b>Hardware</b>"),
            self.bind("hardware.owned", self.owned, to_doc=lambda v: True if v else None),
            self.bind("hardware.gpu", self.gpu),
            self.bind("hardware.gpus_per_node", self.gpus_per_node, on_set=gpn),
            self.bind("hardware.nodes", self.nodes, on_set=nodes),
            self.bind("hardware.intra_node", self.intra),
            self.bind("hardware.inter_node.link", self.inter),
            self.bind("hardware.inter_node.nics_per_node", self.nics), self.rdma,
            self.bind("hardware.host.cpu", self.cpu, to_doc=lambda v: v or None,
                      on_set=host("hardware.host.cpu")),
            self.bind("hardware.host.memory", self.ddr, on_set=host("hardware.host.memory")),
            self.bind("hardware.host.memory_gb", self.host_gb, to_doc=float,
                      on_set=host("hardware.host.memory_gb")),
            self.bind("hardware.host.channels", self.channels,
                      on_set=host("hardware.host.channels")),
            self.bind("hardware.host.sockets", self.sockets,
                      on_set=host("hardware.host.sockets")),
            self.bind("hardware.storage.drive", self.drive),
            self.bind("hardware.storage.drives", self.drives),
        ])
        self.refresh()

    def before_refresh(self) -> None:
        s = self.state.scenario
        if s is not None and s.hardware.host.cpu is None:
            self.cpu.value = ""
        if s is not None:
            self.rdma.value = bool(s.hardware.inter_node.link.rdma)
            self.rdma.disabled = rdma_sibling(self.current("hardware.inter_node.link")) is None

    def _toggle_rdma(self, change: dict) -> None:
        if self._syncing:
            return
        other = rdma_sibling(self.current("hardware.inter_node.link"))
        if other is not None and CATALOGS["link"][other].rdma == change["new"]:
            self.state.set("hardware.inter_node.link", other)


def _times(a, b):
    """a x b for two whole numbers, else None (a refused value multiplies nothing)."""
    ok = all(isinstance(x, int) and not isinstance(x, bool) for x in (a, b))
    return a * b if ok else None


def rdma_sibling(link) -> str | None:
    """The catalog link that differs from ``link`` only in RDMA (``400gbe`` <-> ``400gbe-rdma``),
    or None (InfiniBand, NVLink, inline links)."""
    if not isinstance(link, str):
        return None
    key = link.lower()
    other = key[:-len("-rdma")] if key.endswith("-rdma") else key + "-rdma"
    return other if other in CATALOGS["link"] else None
