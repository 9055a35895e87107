"""Attention heads: :class:`CompactAttention` and :func:`compact_attention`, which keeps
the live heads of a ``nn.MultiheadAttention``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def _live_heads(mha):
    E, h = mha.embed_dim, mha.num_heads
    d = E // h
    W = mha.in_proj_weight.reshape(3, h, d, E)
    Wo = mha.out_proj.weight.reshape(E, h, d)
    value_dead = W[2].reshape(h, -1).abs().sum(dim=1) == 0
    out_dead = Wo.permute(1, 0, 2).reshape(h, -1).abs().sum(dim=1) == 0
    return (~(value_dead | out_dead)).nonzero().flatten().tolist()


class CompactAttention(nn.Module):
    """Multi-head attention with ``n_heads`` heads of width ``head_dim`` (any
    ``n_heads * head_dim``): what :func:`compact_attention` returns.

    Same call as ``nn.MultiheadAttention(embed_dim, ..., batch_first=...)`` for query, key
    and value (``key_padding_mask``, ``attn_mask``, ``need_weights`` and
    ``average_attn_weights`` included).

    Parameters
    ----------
    embed_dim : int
        Width of the queries, keys, values and output.
    n_heads : int
        Number of heads (may be 0).
    head_dim : int
        Width of each head.
    batch_first : bool, default=False
        Inputs and outputs are ``(batch, seq, feature)`` rather than
        ``(seq, batch, feature)``.
    bias : bool, default=True
        Biases in the four projections.

    Attributes
    ----------
    q_proj, k_proj, v_proj : nn.Linear
        ``embed_dim -> n_heads * head_dim``, heads as consecutive blocks of rows.
    out_proj : nn.Linear
        ``n_heads * head_dim -> embed_dim``.
    """

    def __init__(self, embed_dim, n_heads, head_dim, batch_first=False, bias=True):
        super().__init__()
        self.embed_dim, self.n_heads, self.head_dim = embed_dim, n_heads, head_dim
        self.batch_first = batch_first
        inner = n_heads * head_dim
        self.q_proj = nn.Linear(embed_dim, inner, bias=bias)
        self.k_proj = nn.Linear(embed_dim, inner, bias=bias)
        self.v_proj = nn.Linear(embed_dim, inner, bias=bias)
        self.out_proj = nn.Linear(inner, embed_dim, bias=bias)

    @property
    def inner_dim(self):
        return self.n_heads * self.head_dim

    def forward(
        self,
        query,
        key,
        value,
        key_padding_mask=None,
        need_weights=True,
        attn_mask=None,
        average_attn_weights=True,
        is_causal=False,
    ):
        if not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        B, L, _ = query.shape
        S = key.shape[1]
        h, d = self.n_heads, self.head_dim
        q = self.q_proj(query).reshape(B, L, h, d).transpose(1, 2)
        k = self.k_proj(key).reshape(B, S, h, d).transpose(1, 2)
        v = self.v_proj(value).reshape(B, S, h, d).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / (d**0.5)
        if attn_mask is not None:
            mask = attn_mask if attn_mask.dim() == 2 else attn_mask.reshape(B, h, L, S)
            scores = (
                scores.masked_fill(mask, float("-inf"))
                if mask.dtype == torch.bool
                else (scores + mask)
            )
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        weights = F.softmax(scores, dim=-1)
        out = (weights @ v).transpose(1, 2).reshape(B, L, h * d)
        out = self.out_proj(out)
        if not self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        return out, weights.mean(dim=1) if average_attn_weights else weights


@torch.no_grad()
def compact_attention(mha, keep_heads=None):
    """A :class:`CompactAttention` with only the heads ``keep_heads`` of ``mha``.

    Parameters
    ----------
    mha : nn.MultiheadAttention
        Without separate key/value dimensions, with ``add_bias_kv=False``.
    keep_heads : array-like of int, default=None
        ``None``: the heads whose query, key and value rows or output columns are not all
        zero. A head whose value rows and biases are zero contributes nothing; one whose
        value rows are zero but value bias is not contributes a constant, which goes into
        the output bias (exactly: its attention weights sum to 1).

    Returns
    -------
    compact : CompactAttention
    """
    if not mha._qkv_same_embed_dim or mha.bias_k is not None:
        raise ValueError(
            "compact_attention supports nn.MultiheadAttention with kdim = vdim = "
            "embed_dim and add_bias_kv=False."
        )
    E, h = mha.embed_dim, mha.num_heads
    d = E // h
    W = mha.in_proj_weight.reshape(3, h, d, E)
    b = (
        mha.in_proj_bias.reshape(3, h, d)
        if mha.in_proj_bias is not None
        else torch.zeros(3, h, d, dtype=W.dtype)
    )
    Wo = mha.out_proj.weight.reshape(E, h, d)
    bo = mha.out_proj.bias.clone() if mha.out_proj.bias is not None else torch.zeros(E)
    value_dead = W[2].reshape(h, -1).abs().sum(dim=1) == 0
    out_dead = Wo.permute(1, 0, 2).reshape(h, -1).abs().sum(dim=1) == 0
    if keep_heads is None:
        keep = (~(value_dead | out_dead)).nonzero().flatten()
    else:
        keep = torch.as_tensor(keep_heads, dtype=torch.long)
    dropped = torch.ones(h, dtype=torch.bool)
    dropped[keep] = False
    # a dropped head with zero value rows outputs its value bias whatever it attends to
    for j in dropped.nonzero().flatten().tolist():
        if not bool(out_dead[j]):
            if not bool(value_dead[j]):
                raise ValueError(f"Head {j} is live (non-zero value rows and output columns).")
            bo += Wo[:, j] @ b[2, j]
    out = CompactAttention(
        E, len(keep), d, batch_first=mha.batch_first, bias=mha.in_proj_bias is not None
    )
    for proj, part in zip((out.q_proj, out.k_proj, out.v_proj), range(3), strict=True):
        proj.weight.copy_(W[part, keep].reshape(-1, E))
        if proj.bias is not None:
            proj.bias.copy_(b[part, keep].reshape(-1))
    out.out_proj.weight.copy_(Wo[:, keep].reshape(E, -1))
    if out.out_proj.bias is not None:
        out.out_proj.bias.copy_(bo)
    return out.to(W.dtype).eval()
