"""``ember.nn.attention.flex_attention``: attention with a user score function and a block mask,
as ``torch.nn.attention.flex_attention``.

``flex_attention(q, k, v, score_mod, block_mask)`` computes
``softmax(score_mod(q @ k^T * scale, b, h, q_idx, kv_idx) masked by mask_mod) @ v`` the way
PyTorch's eager (uncompiled) path does: the whole score matrix is materialized, the scores are
computed in float32 (float64 for float64 inputs), a row whose every position is masked gives a
zero output and a log-sum-exp of -inf, and autograd differentiates the composition. PyTorch calls
the mods under four nested ``vmap``s with scalar index tensors; ember calls them once with index
tensors shaped to broadcast against the (B, H, Q, KV) scores (``b`` (B,1,1,1), ``h`` (1,H,1,1),
``q_idx`` (1,1,Q,1), ``kv_idx`` (1,1,1,KV)). Mods made of tensor operations and indexing (the
documented ones: causal, sliding window, ALiBi, document masks, ``bias[h, q_idx, kv_idx]``) give
the same result either way; a mod that branches in Python on an index value cannot run under
either.

The block mask (``create_block_mask``) is built exactly as PyTorch builds it (partial and full
blocks, indices ordered by a stable descending argsort, int32); as in PyTorch's eager path, only
its ``mask_mod`` decides which positions are masked.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import math
import operator
import warnings
from typing import NamedTuple

import ember
from ember import Tensor

__all__ = ["AuxOutput", "AuxRequest", "BlockMask", "and_masks", "create_block_mask", "create_mask", "flex_attention",
           "noop_mask", "or_masks"]

_DEFAULT_SPARSE_BLOCK_SIZE = 128
_LARGE_SPARSE_BLOCK_SIZE = 1 << 30


class AuxRequest(NamedTuple):
    """Which auxiliary outputs ``flex_attention`` should return."""

    lse: bool = False
    max_scores: bool = False


class AuxOutput(NamedTuple):
    """The auxiliary outputs asked for (None where not asked)."""

    lse: Tensor | None = None
    max_scores: Tensor | None = None


def noop_mask(batch: Tensor, head: Tensor, token_q: Tensor, token_kv: Tensor) -> Tensor:
    """A mask_mod that masks nothing."""
    return batch.new_ones(size=(), dtype=ember.bool, device=batch.device)


def _identity(score: Tensor, batch: Tensor, head: Tensor, token_q: Tensor, token_kv: Tensor) -> Tensor:
    return score


def and_masks(*mask_mods):
    """The mask_mod that keeps a position only where every given mask_mod keeps it."""
    if not all(callable(arg) for arg in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def and_mask(b, h, q_idx, kv_idx):
        result = b.new_ones((), dtype=ember.bool)
        for mask in mask_mods:
            result = result & mask(b, h, q_idx, kv_idx)
        return result

    return and_mask


def or_masks(*mask_mods):
    """The mask_mod that keeps a position where any given mask_mod keeps it."""
    if not all(callable(arg) for arg in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def or_mask(b, h, q_idx, kv_idx):
        result = b.new_zeros((), dtype=ember.bool)
        for mask in mask_mods:
            result = result | mask(b, h, q_idx, kv_idx)
        return result

    return or_mask


def _positional_count(fn) -> int:
    if isinstance(fn, functools.partial):
        return _positional_count(fn.func) - len(fn.args)
    params = inspect.signature(fn).parameters.values()
    return sum(1 for p in params if p.default is inspect.Parameter.empty
               and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def _index_grids(B: int, H: int, Q: int, KV: int, device):
    return (ember.arange(B, device=device).view(B, 1, 1, 1), ember.arange(H, device=device).view(1, H, 1, 1),
            ember.arange(Q, device=device).view(1, 1, Q, 1), ember.arange(KV, device=device).view(1, 1, 1, KV))


def create_mask(mod_fn, B: int | None, H: int | None, Q_LEN: int, KV_LEN: int, device=None) -> Tensor:
    """The dense (B, H, Q_LEN, KV_LEN) bool mask of a mask_mod (or of a score_mod: False where it
    gives -inf)."""
    device = "cpu" if device is None else device
    B = 1 if B is None else B
    H = 1 if H is None else H
    b, h, m, n = _index_grids(B, H, Q_LEN, KV_LEN, device)
    count = _positional_count(mod_fn)
    if count == 5:
        out = mod_fn(ember.zeros(B, H, Q_LEN, KV_LEN, device=device), b, h, m, n)
        return ember.where(ember.isneginf(out), False, True).expand(B, H, Q_LEN, KV_LEN).contiguous()
    if count == 4:
        return ember.as_tensor(mod_fn(b, h, m, n), device=device).to(ember.bool).expand(
            B, H, Q_LEN, KV_LEN).contiguous()
    raise AssertionError


def _dense_to_ordered(dense_mask: Tensor) -> tuple[Tensor, Tensor]:
    dense_mask = dense_mask.to(dtype=ember.int32)
    num_blocks_in_row = dense_mask.sum(dim=-1)
    col_indices = ember.argsort(dense_mask, dim=-1, descending=True, stable=True)
    return num_blocks_in_row.to(ember.int32).contiguous(), col_indices.to(ember.int32).contiguous()


def _ordered_to_dense(num_blocks_in_row: Tensor, col_indices: Tensor, num_cols: int) -> Tensor:
    max_entries = col_indices.shape[-1]
    valid = ember.arange(max_entries, device=col_indices.device) < num_blocks_in_row.unsqueeze(-1).long()
    targets = ember.where(valid, col_indices.long(), num_cols)
    dense = ember.zeros(*col_indices.shape[:-1], num_cols + 1, dtype=ember.int32, device=col_indices.device)
    dense.scatter_(-1, targets, ember.ones_like(targets, dtype=ember.int32))
    return dense[..., :num_cols].contiguous()


def _transpose_ordered(num_blocks_in_row: Tensor, col_indices: Tensor) -> tuple[Tensor, Tensor]:
    dense = _ordered_to_dense(num_blocks_in_row, col_indices, col_indices.shape[-1])
    return _dense_to_ordered(dense.transpose(-2, -1))


def _sliced_mask_mod_error(b, h, q_idx, kv_idx):
    raise RuntimeError("Cannot use mask_mod from a sliced BlockMask")


class BlockMask:
    """Which (query block, key block) pairs attention visits: per query block row, the number of
    partially masked key blocks and their indices (``kv_num_blocks``, ``kv_indices``), the same for
    fully unmasked blocks (``full_kv_*``), their transposes (``q_*``), the block size, and the
    ``mask_mod`` that masks positions inside partial blocks."""

    def __init__(self, seq_lengths, kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices, q_num_blocks,
                 q_indices, full_q_num_blocks, full_q_indices,
                 BLOCK_SIZE=(_DEFAULT_SPARSE_BLOCK_SIZE, _DEFAULT_SPARSE_BLOCK_SIZE), mask_mod=noop_mask, *,
                 dq_write_order=None, dq_write_order_full=None, dq_kv_order=None, dq_kv_order_spt=None) -> None:
        if kv_indices.dim() < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise AssertionError("full_kv_num_blocks and full_kv_indices must be both provided or omitted")
        if (full_q_num_blocks is None) != (full_q_indices is None):
            raise AssertionError("full_q_num_blocks and full_q_indices must be both provided or omitted")
        if dq_write_order_full is not None and dq_write_order is None:
            raise ValueError("dq_write_order_full requires dq_write_order")
        self.seq_lengths = tuple(seq_lengths)
        self.kv_num_blocks, self.kv_indices = kv_num_blocks, kv_indices
        self.full_kv_num_blocks, self.full_kv_indices = full_kv_num_blocks, full_kv_indices
        self.q_num_blocks, self.q_indices = q_num_blocks, q_indices
        self.full_q_num_blocks, self.full_q_indices = full_q_num_blocks, full_q_indices
        self.dq_write_order, self.dq_write_order_full = dq_write_order, dq_write_order_full
        self.dq_kv_order, self.dq_kv_order_spt = dq_kv_order, dq_kv_order_spt
        self.BLOCK_SIZE = tuple(BLOCK_SIZE)
        self.mask_mod = mask_mod

    @classmethod
    def from_kv_blocks(cls, kv_num_blocks, kv_indices, full_kv_num_blocks=None, full_kv_indices=None,
                       BLOCK_SIZE=_DEFAULT_SPARSE_BLOCK_SIZE, mask_mod=None, seq_lengths=None,
                       compute_q_blocks: bool = True, *, dq_write_order=None, dq_write_order_full=None,
                       dq_kv_order=None):
        """A BlockMask from its key-block lists (the query-block lists are their transposes)."""
        if kv_indices.dim() < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise AssertionError("full_kv_num_blocks and full_kv_indices must be both provided or omitted")
        q_num_blocks = q_indices = full_q_num_blocks = full_q_indices = None
        if compute_q_blocks:
            q_num_blocks, q_indices = _transpose_ordered(kv_num_blocks, kv_indices)
            if full_kv_num_blocks is not None:
                full_q_num_blocks, full_q_indices = _transpose_ordered(full_kv_num_blocks, full_kv_indices)
        if isinstance(BLOCK_SIZE, int):
            BLOCK_SIZE = (BLOCK_SIZE, BLOCK_SIZE)
        if seq_lengths is None:
            seq_lengths = (kv_indices.shape[-2] * BLOCK_SIZE[0], kv_indices.shape[-1] * BLOCK_SIZE[1])
        if dq_kv_order is not None and not isinstance(dq_kv_order, (bool, Tensor)):
            raise ValueError("dq_kv_order must be a bool, Tensor, or None")
        return cls(seq_lengths, kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices, q_num_blocks,
                   q_indices, full_q_num_blocks, full_q_indices, BLOCK_SIZE,
                   mask_mod if mask_mod is not None else noop_mask, dq_write_order=dq_write_order,
                   dq_write_order_full=dq_write_order_full,
                   dq_kv_order=dq_kv_order if isinstance(dq_kv_order, Tensor) else None,
                   dq_kv_order_spt=dq_kv_order if isinstance(dq_kv_order, bool) else None)

    def as_tuple(self, flatten: bool = True) -> tuple:
        block_size = tuple(self.BLOCK_SIZE) if flatten else (self.BLOCK_SIZE,)
        seq_lengths = tuple(self.seq_lengths) if flatten else (self.seq_lengths,)
        return (*seq_lengths, self.kv_num_blocks, self.kv_indices, self.full_kv_num_blocks, self.full_kv_indices,
                self.q_num_blocks, self.q_indices, self.full_q_num_blocks, self.full_q_indices, self.dq_write_order,
                self.dq_write_order_full, self.dq_kv_order, self.dq_kv_order_spt, *block_size, self.mask_mod)

    @property
    def shape(self) -> tuple:
        *batch_dims, _, _ = self.kv_indices.shape
        return tuple(batch_dims) + tuple(self.seq_lengths)

    def numel(self) -> int:
        """The number of positions the mask covers (sparsity not counted)."""
        return functools.reduce(operator.mul, self.shape, 1)

    def sparsity(self) -> float:
        """The percentage of the positions that lie in blocks attention skips."""
        computed_blocks = int(self.kv_num_blocks.sum())
        if self.full_kv_num_blocks is not None:
            computed_blocks += int(self.full_kv_num_blocks.sum())
        return 100 * (1 - computed_blocks * self.BLOCK_SIZE[0] * self.BLOCK_SIZE[1] / self.numel())

    def to_dense(self) -> Tensor:
        """The block-level mask, 1 where a block is visited (int32, (..., Q blocks, KV blocks))."""
        dense = _ordered_to_dense(self.kv_num_blocks, self.kv_indices, self.kv_indices.shape[-1])
        if self.full_kv_num_blocks is not None:
            dense = dense | _ordered_to_dense(self.full_kv_num_blocks, self.full_kv_indices,
                                              self.full_kv_indices.shape[-1])
        return dense

    def to_string(self, grid_size=(20, 20), limit: int = 4) -> str:
        """A picture of the block mask: a full block "█", an empty one " ", a mixed cell "░"."""
        dense = self.to_dense()
        *batch_dims, num_rows, num_cols = dense.shape
        if isinstance(grid_size, int) and grid_size == -1:
            max_rows, max_cols = num_rows, num_cols
        elif isinstance(grid_size, int):
            max_rows = max_cols = grid_size
        else:
            max_rows, max_cols = grid_size
        row_step = max(1, -(-num_rows // max_rows))
        col_step = max(1, -(-num_cols // max_cols))
        pictures = []
        for i, batch_idx in enumerate(itertools.product(*[range(n) for n in batch_dims])):
            if i == limit:
                pictures += ["...", "To print out more, set BlockMask.to_string(limit=N)",
                             "You can also index (BlockMask[batch, head]) to choose a specific batch or head"]
                break
            cur = dense
            for idx in batch_idx:
                cur = cur[idx]
            text = f"{batch_idx}\n"
            for r in range(0, num_rows, row_step):
                for c in range(0, num_cols, col_step):
                    fraction = float(cur[r:r + row_step, c:c + col_step].float().mean())
                    text += ("█" if fraction == 1 else " " if fraction == 0 else "░") * 2
                text += "\n"
            pictures.append(text)
        return "\n".join(pictures)

    def __str__(self) -> str:
        return f"BlockMask(shape={self.shape}, sparsity={self.sparsity():.2f}%, \n{self.to_string().strip()}\n)"

    def __repr__(self) -> str:
        def shape_or_none(x):
            return x.shape if x is not None else None

        mod = getattr(self.mask_mod, "__name__", self.mask_mod)
        return (f"BlockMask(\n    kv_num_blocks={self.kv_num_blocks.shape},\n    kv_indices={self.kv_indices.shape},\n"
                f"    full_kv_num_blocks={shape_or_none(self.full_kv_num_blocks)},\n"
                f"    full_kv_indices={shape_or_none(self.full_kv_indices)},\n"
                f"    q_num_blocks={shape_or_none(self.q_num_blocks)},\n"
                f"    q_indices={shape_or_none(self.q_indices)},\n"
                f"    full_q_num_blocks={shape_or_none(self.full_q_num_blocks)},\n"
                f"    full_q_indices={shape_or_none(self.full_q_indices)},\n    BLOCK_SIZE={self.BLOCK_SIZE},\n"
                f"    shape={self.shape},\n    sparsity={self.sparsity():.2f}%,\n    mask_mod={mod}\n)")

    def __getitem__(self, index) -> BlockMask:
        """The block mask of the chosen batches/heads/query-block rows (its mask_mod cannot be used)."""
        if self.dq_kv_order is not None:
            raise NotImplementedError("Slicing BlockMask with tensor dq_kv_order is not supported yet. Construct a "
                                      "new BlockMask with matching precomputed dq_write_order metadata.")
        index = index if isinstance(index, tuple) else (index,)
        padded = (*index, slice(None), slice(None), slice(None))[:3]
        sizes = self.kv_num_blocks.shape[:3]
        index = tuple((slice(i + n, i + n + 1) if -n <= i < 0 else slice(i, i + 1)) if isinstance(i, int) else i
                      for i, n in zip(padded, sizes))
        full = (None, None) if self.full_kv_num_blocks is None else (self.full_kv_num_blocks[index],
                                                                    self.full_kv_indices[index])
        return BlockMask.from_kv_blocks(self.kv_num_blocks[index], self.kv_indices[index], *full,
                                        BLOCK_SIZE=self.BLOCK_SIZE, mask_mod=_sliced_mask_mod_error,
                                        seq_lengths=self.seq_lengths, compute_q_blocks=self.q_indices is not None)

    def _adjust(self, new_q_len: int, new_kv_len: int) -> BlockMask:
        new_num_rows = -(-new_q_len // self.BLOCK_SIZE[0])
        new_num_cols = -(-new_kv_len // self.BLOCK_SIZE[1])

        def crop_ordered(num, idx):
            dense = _ordered_to_dense(num, idx, idx.shape[-1])[..., :new_num_rows, :new_num_cols]
            return _dense_to_ordered(dense)

        kv = crop_ordered(self.kv_num_blocks, self.kv_indices)
        full = (None, None) if self.full_kv_num_blocks is None else crop_ordered(self.full_kv_num_blocks,
                                                                               self.full_kv_indices)
        return BlockMask.from_kv_blocks(*kv, *full, BLOCK_SIZE=self.BLOCK_SIZE, mask_mod=self.mask_mod,
                                        seq_lengths=(new_q_len, new_kv_len))

    def to(self, device) -> BlockMask:
        """The block mask with its tensors on ``device``."""
        def move(x):
            return x.to(device) if isinstance(x, Tensor) else x

        return BlockMask(self.seq_lengths, *(move(getattr(self, n)) for n in (
            "kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks", "q_indices",
            "full_q_num_blocks", "full_q_indices")), self.BLOCK_SIZE, self.mask_mod,
            dq_write_order=move(self.dq_write_order), dq_write_order_full=move(self.dq_write_order_full),
            dq_kv_order=move(self.dq_kv_order), dq_kv_order_spt=self.dq_kv_order_spt)


def _convert_mask_to_block_mask(mask: Tensor, Q_BLOCK_SIZE: int, KV_BLOCK_SIZE: int, separate_full_blocks: bool):
    while mask.dim() < 4:
        mask = mask.unsqueeze(0)
    pad_kv = -mask.shape[-1] % KV_BLOCK_SIZE
    pad_q = -mask.shape[-2] % Q_BLOCK_SIZE
    mask = ember.nn.functional.pad(mask.to(ember.int32), (0, pad_kv, 0, pad_q))
    B, H, Q, KV = mask.shape
    mask = mask.view(B, H, Q // Q_BLOCK_SIZE, Q_BLOCK_SIZE, KV // KV_BLOCK_SIZE, KV_BLOCK_SIZE)
    block_sum = mask.permute(0, 1, 2, 4, 3, 5).sum(dim=[-2, -1])
    if separate_full_blocks:
        full_sum = Q_BLOCK_SIZE * KV_BLOCK_SIZE
        partial = ((block_sum > 0) & (block_sum < full_sum)).to(ember.int8)
        return partial, (block_sum == full_sum).to(ember.int8)
    return (block_sum > 0).to(ember.int8), None


def create_block_mask(mask_mod, B: int | None, H: int | None, Q_LEN: int, KV_LEN: int, device=None,
                      BLOCK_SIZE=_DEFAULT_SPARSE_BLOCK_SIZE, _compile=False, separate_full_blocks: bool = True,
                      compute_dq_write_order: bool = False, dq_kv_order: bool = True) -> BlockMask:
    """The BlockMask of ``mask_mod(b, h, q_idx, kv_idx)`` over (B, H, Q_LEN, KV_LEN) (None: 1)."""
    if _positional_count(mask_mod) != 4:
        raise AssertionError(f"create-block_mask requires a mask_mod function! Got {mask_mod}")
    B = 1 if B is None else B
    H = 1 if H is None else H
    Q_BLOCK_SIZE, KV_BLOCK_SIZE = (BLOCK_SIZE, BLOCK_SIZE) if isinstance(BLOCK_SIZE, int) else BLOCK_SIZE
    if _compile:
        warnings.warn("_compile flag on create_block_mask was originally added to work around a torch.compile "
                      "limitation. That limitation has since been addressed. So, to compile create_block_mask, we "
                      "suggest doing torch.compile(create_block_mask). This still works for now, but will be removed "
                      "in the future.", DeprecationWarning, stacklevel=2)
    if not isinstance(dq_kv_order, bool):
        raise ValueError("dq_kv_order must be a bool when using create_block_mask")
    if compute_dq_write_order:
        raise NotImplementedError("create_block_mask(compute_dq_write_order=True): the deterministic FLASH backward's "
                                  "write order is CUDA kernel metadata, which ember does not build")
    mask = create_mask(mask_mod, B, H, Q_LEN, KV_LEN, device)
    partial, full = _convert_mask_to_block_mask(mask, Q_BLOCK_SIZE, KV_BLOCK_SIZE, separate_full_blocks)
    kv = _dense_to_ordered(partial)
    full_kv = _dense_to_ordered(full) if full is not None else (None, None)
    return BlockMask.from_kv_blocks(*kv, *full_kv, BLOCK_SIZE=(Q_BLOCK_SIZE, KV_BLOCK_SIZE), mask_mod=mask_mod,
                                    seq_lengths=(Q_LEN, KV_LEN))


def _create_empty_block_mask(query: Tensor) -> BlockMask:
    device = query.device
    return BlockMask.from_kv_blocks(ember.ones([1, 1, 1], dtype=ember.int32, device=device),
                                    ember.zeros([1, 1, 1, 1], dtype=ember.int32, device=device),
                                    BLOCK_SIZE=_LARGE_SPARSE_BLOCK_SIZE, seq_lengths=(1, 1))


_WARNED: set = set()


def _validate(query, key, value, block_mask, enable_gqa):
    if query.dtype != key.dtype or query.dtype != value.dtype:
        if not (key.dtype == value.dtype and key.element_size() <= query.element_size()
                and key.is_floating_point()):
            raise ValueError(f"Expected query, key, and value to have the same dtype, but got query.dtype: "
                             f"{query.dtype}, key.dtype: {key.dtype}, and value.dtype: {value.dtype} instead.")
    if query.device != key.device or query.device != value.device:
        raise ValueError(f"Expected query, key, and value to have the same device type, but got query.device: "
                         f"{query.device}, key.device: {key.device}, and value.device: {value.device} instead.")
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise ValueError(f"Expected query, key, and value to all be  at least 2 dimensional, but got query.dim: "
                         f"{query.dim()}, key.dim: {key.dim()} and value.dim: {value.dim()} instead.")
    if query.size(-1) != key.size(-1):
        raise ValueError(f"Expect query and key/value to have the same embedding dimension but got "
                         f"E={query.size(-1)} and E={key.size(-1)}.")
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise NotImplementedError("NYI: query, key, and value must be 4D tensors")
    if not enable_gqa and query.size(-3) != key.size(-3):
        raise ValueError(f"Expect query and key/value to have the same number of heads but got Hq={query.size(-3)} "
                         f"and Hkv={key.size(-3)}. Try setting enable_gqa=True for GQA.")
    if enable_gqa and query.size(1) % key.size(1) != 0:
        raise ValueError(f"Expect number of query heads to be a multiple of kv heads for GQA but got "
                         f"Hq={query.size(1)} and Hkv={key.size(1)}.")
    if query.size(0) != key.size(0):
        if block_mask is None:
            raise ValueError(f"Expect query and key/value to have the same batch size, or non-none block_mask, but "
                             f"got block_mask=None, Bq={query.size(0)}, and Bkv={key.size(0)}.")
        if block_mask.kv_num_blocks.size(0) != query.size(0):
            raise ValueError(f"Expect query and key/value to have the same batch size, or block_mask and query to "
                             f"have the same batch size, but got Bq={query.size(0)}, Bkv={key.size(0)}, "
                             f"B_block_mask={block_mask.kv_num_blocks.size(0)}.")


def _check_block_mask_lengths(block_mask, q_len: int, kv_len: int) -> None:
    if block_mask.BLOCK_SIZE == (_LARGE_SPARSE_BLOCK_SIZE, _LARGE_SPARSE_BLOCK_SIZE):
        return
    bq, bkv = block_mask.shape[-2], block_mask.shape[-1]
    if q_len > bq or kv_len > bkv:
        raise ValueError(f"block_mask was created for block_mask.shape={block_mask.shape} but got q_len={q_len} and "
                         f"kv_len={kv_len}. As the block mask was created for a smaller length than you're using it "
                         "for, you likely need to create a new block mask.")
    if (q_len < bq and kv_len <= bkv) or (q_len <= bq and kv_len < bkv):
        raise ValueError(f"block_mask was created for block_mask.shape={block_mask.shape} but got q_len={q_len} and "
                         f"kv_len={kv_len}. As the block mask was created for a larger length than you're using it "
                         "for, you can either 1. create a new block mask with the correct length, or 2. 'adjust' the "
                         "existing block mask to the correct length by calling block_mask._adjust(q_len, kv_len). "
                         "This essentially 'crops' the block mask to the upper left corner, which does not work for "
                         "all mask_mods!")


def flex_attention(query: Tensor, key: Tensor, value: Tensor, score_mod=None, block_mask: BlockMask | None = None,
                   scale: float | None = None, enable_gqa: bool = False, return_lse: bool = False,
                   kernel_options=None, *, return_aux: AuxRequest | None = None):
    """Attention of (B, Hq, L, E) queries over (B, Hkv, S, E) keys and (B, Hkv, S, Ev) values, with
    ``score_mod(score, b, h, q_idx, kv_idx)`` applied to each scaled score and the positions
    ``block_mask.mask_mod`` rejects left out. Returns (B, Hq, L, Ev); with ``return_lse`` (deprecated)
    or ``return_aux=AuxRequest(lse=True)`` also the (B, Hq, L) log-sum-exp of the scores."""
    _validate(query, key, value, block_mask, enable_gqa)
    if score_mod is None:
        score_mod = _identity
    if block_mask is None:
        block_mask = _create_empty_block_mask(query)
    if getattr(block_mask, "mask_mod", None) is _sliced_mask_mod_error:
        raise RuntimeError("Cannot use mask_mod from a sliced BlockMask")
    _check_block_mask_lengths(block_mask, query.size(-2), key.size(-2))
    if scale is None:
        scale = 1.0 / math.sqrt(query.size(-1))
    if query.device != block_mask.kv_num_blocks.device:
        raise RuntimeError(f"Expect q/k/v and block_mask to be on the same device but got {query.device} and "
                           f"{block_mask.kv_num_blocks.device}.")
    if return_lse and return_aux is not None:
        raise ValueError("Cannot specify both return_lse and return_aux. return_lse is deprecated, please use "
                         "return_aux=AuxRequest(lse=True) instead.")
    if return_lse and "deprecated_return_lse" not in _WARNED:
        _WARNED.add("deprecated_return_lse")
        warnings.warn("return_lse is deprecated and will be removed in v2.10. Please use "
                      "return_aux=AuxRequest(lse=True) instead.", FutureWarning, stacklevel=2)
    if return_aux is not None and return_aux.max_scores and query.device.type == "cpu":
        raise NotImplementedError("Returning max scores is not supported on CPU/MPS.")

    B, Hq, L, _ = query.shape
    Hkv, S = key.size(1), key.size(2)
    if enable_gqa and Hq != Hkv:
        key = key.repeat_interleave(Hq // Hkv, dim=1)
        value = value.repeat_interleave(Hq // Hkv, dim=1)
    working = ember.float64 if query.dtype == ember.float64 else ember.float32
    scores = (query @ key.transpose(-2, -1)).to(working) * scale
    b, h, m, n = _index_grids(B, Hq, L, S, query.device)
    scores = ember.as_tensor(score_mod(scores, b, h, m, n)).expand(B, Hq, L, S)
    keep = ember.as_tensor(block_mask.mask_mod(b, h, m, n)).to(ember.bool)
    scores = scores.masked_fill(~keep, -math.inf)
    lse = scores.logsumexp(dim=-1)
    masked_rows = ember.isneginf(scores).all(dim=-1)
    lse = ember.where(masked_rows, -math.inf, lse)
    probs = ember.softmax(scores, dim=-1)
    probs = ember.where(masked_rows.unsqueeze(-1), 0.0, probs)
    out = probs.to(query.dtype) @ value.to(query.dtype)
    want_lse = return_lse or (return_aux is not None and return_aux.lse)
    if return_aux is not None:
        return out, AuxOutput(lse=lse if want_lse else None, max_scores=None)
    if return_lse:
        return out, lse
    return out
