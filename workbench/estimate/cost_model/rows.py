"""The rows the cost model's passes share: one row per evaluated (layout, pipeline rank) of a
``LayoutGrid``, with what the rank holds (layers, leading dense layers, embedding, head, the
sends of its chunks) and the microbatches per step — all of which depend on the layout alone —
and, once bound to a scenario's block table (``block_table.block_entries``), each row's block
data (``block_costs.block_costs``, activations, parameters of its (tp, cp, ep, micro-batch)) as
columns, and the reductions from rows back to layouts.

The layout-only part is built once per candidate set and shared by every setting the planner
tries on it (``take`` keeps a subset of the layouts, ``bind`` attaches one setting's block data):
the settings are columns over the same rows.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from workbench.catalog.types import ModelShape
from workbench.estimate.model.params import chunk_of, chunk_owner, chunk_size, chunk_start
from workbench.estimate.cost_model.pipeline_ranks import rank_rows
from workbench.scenario.layouts import LayoutGrid


class Rows:
    """One row per evaluated (layout, pipeline rank): the layouts repeated (``grid``), the rank,
    what the rank holds, and (after ``bind``) the block data of its (tp, cp, ep, micro-batch)
    as columns."""

    def __init__(self, m: ModelShape, global_batch: int, g: LayoutGrid, every_rank: bool
                 ) -> None:
        self.layouts = g
        self.layout_of, self.rank = rank_rows(m, g, every_rank)
        self.layers_total = m.layers
        self.dense_total = m.moe.dense_layers if m.moe is not None else m.layers
        self.grid = G = g.take(self.layout_of)
        self.layers, self.dense, self.sends, self.head_rank = _placement(
            m.layers, self.dense_total, G.pp, G.chunks_per_rank, self.rank, G.v_shape)
        self.microbatches = global_batch // (G.micro_batch * G.dp)
        self._derive()
        self.table = None
        self.per: list[dict] = []
        self.key_index = self.entry = None

    def _derive(self) -> None:
        """The columns that follow from the ones set: counts, layout starts, edges."""
        self.n = len(self.rank)
        self.starts = np.flatnonzero(np.concatenate((
            [True], self.layout_of[1:] != self.layout_of[:-1])))
        self.moe = self.layers - self.dense
        self.has_emb = self.rank == 0
        self.has_head = self.head_rank == self.rank
        self._columns: dict = {}

    def take(self, keep: np.ndarray) -> "Rows":
        """The rows of the layouts ``keep`` (a mask over the layouts), block data included."""
        row = keep[self.layout_of]
        out = object.__new__(Rows)
        out.__dict__.update(self.__dict__)
        out.layouts = self.layouts.take(keep)
        out.layout_of = (np.cumsum(keep) - 1)[self.layout_of[row]]
        out.grid = self.grid.take(row)
        for name in ("rank", "layers", "dense", "sends", "head_rank", "microbatches"):
            setattr(out, name, getattr(self, name)[row])
        if self.entry is not None:
            out.key_index, out.entry = self.key_index[row], self.entry[row]
        out._derive()
        return out

    def bind(self, table, per: list[dict], entries: np.ndarray, key_of_layout: np.ndarray
             ) -> "Rows":
        """Attach the block data: ``table`` (``block_table.BlockTable``), ``per`` the data of
        each distinct key of the grid, ``entries`` each key's table entry, ``key_of_layout``
        each layout's key."""
        self.table, self.per = table, per
        self.key_index = key_of_layout[self.layout_of]          # row -> its block data
        self.entry = np.asarray(entries, dtype=np.int64)[self.key_index]   # row -> table entry
        self._columns = {}
        return self

    def col(self, kind: str, name: str | None = None) -> np.ndarray:
        """A block datum per row (0 where the block does not exist)."""
        key = (kind, name)
        if key not in self._columns:
            self._columns[key] = self.table.column(kind, name)[self.entry]
        return self._columns[key]

    def layer_sum(self, name: str) -> np.ndarray:
        """The sum of a layer datum over the layers each row's rank holds (dense and MoE),
        once per bound rows; a model without MoE layers holds none on any rank, so their
        term (zero) is not added."""
        key = ("sum", "layers", name)
        if key not in self._columns:
            out = self.dense * self.col("dense", name)
            if self.layers_total > self.dense_total:
                out = out + self.moe * self.col("moe", name)
            self._columns[key] = out
        return self._columns[key]

    def head_col(self, name: str) -> np.ndarray:
        """A datum of the output head per row, ``name`` + "_sep" where the head is on its own
        stage (head rank not 0), + "_same" where it is beside the last layers; once per bound
        rows."""
        key = ("head", name)
        if key not in self._columns:
            self._columns[key] = np.where(self.head_rank != 0, self.col(name + "_sep"),
                                          self.col(name + "_same"))
        return self._columns[key]

    def on_head(self, name: str) -> np.ndarray:
        """A datum (``col(name)``) on the rows whose rank holds the head, 0 elsewhere; once
        per bound rows."""
        key = ("on_head", name)
        if key not in self._columns:
            self._columns[key] = self.has_head * self.col(name)
        return self._columns[key]

    def on_embedding(self, name: str) -> np.ndarray:
        """A datum (``col(name)``) on the rows whose rank holds the embedding, 0 elsewhere;
        once per bound rows."""
        key = ("on_emb", name)
        if key not in self._columns:
            self._columns[key] = self.has_emb * self.col(name)
        return self._columns[key]

    def layer_max(self, name: str) -> np.ndarray:
        """The larger of a layer datum (a size, >= 0) over the kinds of layer (dense, MoE)
        each row's rank holds, 0 where it holds none; once per bound rows."""
        key = ("max", "layers", name)
        if key not in self._columns:
            out = np.where(self.dense > 0, self.col("dense", name), 0)
            if self.layers_total > self.dense_total:
                out = np.maximum(out, np.where(self.moe > 0, self.col("moe", name), 0))
            self._columns[key] = out
        return self._columns[key]

    def full(self, x) -> np.ndarray:
        """``x`` (a number or a per-row array) as one entry per row (``per_row``)."""
        return per_row(x, self.n)

    def _per_layout(self, x) -> np.ndarray | None:
        """``x`` as one entry per layout when it is a scalar (None when it is per row)."""
        x = np.asarray(x)
        return np.full(len(self.starts), x) if x.ndim == 0 else None

    def worst(self, x) -> np.ndarray:
        """The largest value over each layout's rows."""
        same = self._per_layout(x)
        return same if same is not None else np.maximum.reduceat(x, self.starts)

    def argworst(self, x, worst=None) -> np.ndarray:
        """The pipeline rank of each layout's largest value (the lowest on ties); ``worst``:
        ``worst(x)`` where the caller has it."""
        hit = x == (self.worst(x) if worst is None else worst)[self.layout_of]
        return self.rank[np.minimum.reduceat(np.where(hit, np.arange(self.n), self.n),
                                             self.starts)]

    def first(self, x) -> np.ndarray:
        """Per layout: the value of its first row (for what every row of a layout shares)."""
        same = self._per_layout(x)
        return same if same is not None else np.asarray(x)[self.starts]


def per_row(x, n: int) -> np.ndarray:
    """``x`` (a number or an array of ``n``) as an array of ``n``: an array of ``n`` as it is
    (``np.broadcast_to``'s view costs microseconds a call, and a pass makes dozens), else
    filled (a number) or broadcast (a read-only view)."""
    if type(x) is np.ndarray and x.shape == (n,):
        return x
    if np.ndim(x) == 0:
        return np.full(n, x)
    return np.broadcast_to(x, n)


def take_rows(x, row: np.ndarray, n: int):
    """A per-row value ``x`` (an array over the ``n`` rows, a number, or a record of them:
    dicts, tuples, dataclasses) at the rows ``row`` (a mask); what is not per row as it is."""
    if isinstance(x, np.ndarray):
        return x[row] if x.ndim and x.shape[0] == n else x
    if isinstance(x, dict):
        return {k: take_rows(v, row, n) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(take_rows(v, row, n) for v in x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return dataclasses.replace(x, **{f.name: take_rows(getattr(x, f.name), row, n)
                                         for f in dataclasses.fields(x) if f.init})
    return x


# Rows times chunks per rank above which ``_placement`` computes each distinct (pp, chunks per
# rank, rank) once (np.unique's sort costs less than the per-chunk arithmetic on every row)
DISTINCT_PLACEMENT_WORK = 2048


def _placement(layers: int, dense_layers: int, pp, cpr, rank, v_shape: bool) -> tuple:
    """Per row: the layers a pipeline rank holds, how many of them are the leading dense ones,
    the activations it sends per microbatch (forward to the next chunk, backward to the
    previous, when that chunk is on another rank), and the rank holding the head: row by row,
    or once per distinct (pp, chunks per rank, rank) where there are many rows
    (``DISTINCT_PLACEMENT_WORK``)."""
    pp, cpr, rank = np.asarray(pp), np.asarray(cpr), np.asarray(rank)
    if rank.size * (int(cpr.max()) if cpr.size else 0) <= DISTINCT_PLACEMENT_WORK:
        return _placed(layers, dense_layers, pp, cpr, rank, v_shape)
    code = (pp * 1024 + cpr) * 65536 + rank
    uniq, inverse = np.unique(code, return_inverse=True)
    rest, r = np.divmod(uniq, 65536)
    p, c_per = np.divmod(rest, 1024)
    return tuple(x[inverse] for x in _placed(layers, dense_layers, p, c_per, r, v_shape))


def _placed(layers: int, dense_layers: int, p, c_per, r, v_shape: bool) -> tuple:
    """``_placement`` of rows (pp ``p``, chunks per rank ``c_per``, rank ``r``: arrays)."""
    chunks = p * c_per
    held = dense = sends = 0
    for k in range(int(c_per.max()) if c_per.size else 0):
        c = chunk_of(r, k, p, v_shape)
        size = chunk_size(layers, chunks, c)
        # the chunk's leading dense layers: dense_layers - its first layer, within 0..size
        lead = np.minimum(np.maximum(dense_layers - chunk_start(layers, chunks, c), 0), size)
        nxt = (c + 1 < chunks) & (chunk_owner(c + 1, p, v_shape) != r)
        prev = (c > 0) & (chunk_owner(c - 1, p, v_shape) != r)
        if k:      # the k-th chunk where the rank has one (every rank has a first)
            on = k < c_per
            size, lead, nxt, prev = np.where(on, size, 0), np.where(on, lead, 0), on & nxt, on & prev
        held, dense, sends = held + size, dense + lead, sends + nxt + prev
    head = chunk_owner(chunks - 1, p, v_shape)
    return tuple(x if type(x) is np.ndarray and x.shape == r.shape and x.dtype == np.int64
                 else np.broadcast_to(x, r.shape).astype(np.int64)
                 for x in (held, dense, sends, head))
