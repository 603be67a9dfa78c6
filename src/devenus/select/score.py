"""Scoring: per-sample signals and their per-question aggregates, every one "higher = more uncertain".

Answer signals (from the G responses, via :mod:`devenus.verify`):

- ``accuracy``: ``u = 1 - p`` with ``p`` the pass rate against the row's label (labeled rows only;
  the per-sample value is ``1 - reward``). Question-level: the aggregation does not apply.
- ``consistency``: ``u = 1 - largest equivalent-answer cluster / G``; a response without an answer
  (truncated, none extracted) is a singleton. Question-level; the per-sample value kept is
  ``1 - own cluster / G``.

Model-internal signals, all from ONE teacher-forced forward per (prompt, response) batch, with hooks,
each computed by a registered unit (:mod:`devenus.select.forward`, one module per unit):

- ``entropy``: ``u = mean over response tokens of H(p_t)`` (full logits width);
- ``self_certainty``: ``u = - mean SC_t``;
- ``coe_r`` / ``coe_c``: ``u = - CoE-R`` / ``- CoE-C`` (higher CoE = more likely correct);
- ``cot_kinetics``: ``u = E``, the mean CoT-Kinetics energy over response tokens (RECONSTRUCTED;
  the sign is our choice: check it with ``route.calibrate_sign``);
- ``pivot_trace``: ``u`` = the number of pivots (RECONSTRUCTED): Q and K of ~4 layers at 50-87% depth
  are recomputed from the captured inputs of their attention modules and reduced in query chunks to
  the far-back attention mass per position (:mod:`devenus.signals.attention`); no attention map.

The forward runs the decoder without its head: the head is applied to the final hidden states in
token x vocabulary chunks (:func:`devenus.signals.head.token_stats_from_hidden`), so the ``[T, V]``
logits never exist, and each layer's output is pooled over response tokens as it is produced
(:class:`devenus.signals.hidden.LayerPool`), so ``[L, T, d]`` never exists.

Aggregation over a question's G samples: ``mean`` (default), ``median``, or ``majority`` (mean over
the samples in the winning answer cluster; all samples when there is no winner).
"""

from __future__ import annotations

import weakref
from typing import Sequence

import numpy as np
import torch

from devenus.select.config import MODEL_SIGNALS
from devenus.select.forward import ForwardBatch, ForwardOptions
from devenus.select.forward.pivot import pivot_layer_ids  # noqa: F401 (re-exported)
from devenus.select.signal_table import UNITS


# ------------------------------------------------------------------------------ the forward
def _decoder_parts(model):
    base = getattr(model, model.base_model_prefix, None)
    head = model.get_output_embeddings()
    if base is None or head is None or not hasattr(base, "layers") or not hasattr(base, "norm"):
        raise ValueError(f"{type(model).__name__}: expected a decoder-only model with .layers, .norm and an output head")
    return base, head


def forward_signals(model, prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]],
                    want: Sequence[str] = tuple(s for s in MODEL_SIGNALS if s != "pivot_trace"), *, batch_size: int = 32,
                    max_batch_tokens: int | None = None, token_chunk: int = 512,
                    vocab_chunk: int = 8192, temperature: float = 1.0, step_starts: Sequence[Sequence[int]] | None = None,
                    pivot_window: int = 256, pivot_chunk: int = 256, pivot_layers: Sequence[int] | None = None
                    ) -> dict[str, np.ndarray]:
    """Raw model-internal scores per (prompt, response): ``entropy`` (mean H), ``self_certainty``
    (mean SC), ``coe_r``, ``coe_c``, ``cot_kinetics`` (mean energy), ``pivot_trace`` (pivot count;
    needs ``step_starts``, the first token of each step of each response); float64 arrays of length
    ``len(response_ids)``, in the order given. Each is computed by its registered unit
    (:data:`devenus.select.signal_table.UNITS`), all of them in one forward per batch.

    The forwards take the sequences longest first, at most ``batch_size`` of them and, with
    ``max_batch_tokens``, at most that many padded tokens (sequences x the longest) per forward
    (:func:`token_batches`); a sequence is scored the same whichever batch it is in."""
    want = [w for w in want if w in MODEL_SIGNALS]
    n = len(response_ids)
    out = {w: np.full(n, np.nan) for w in want}
    if not want or n == 0:
        return out
    base, head = _decoder_parts(model)
    options = ForwardOptions(token_chunk, vocab_chunk, temperature, step_starts, pivot_window, pivot_chunk, pivot_layers)
    by_unit: dict[type, list[str]] = {}
    for w in want:  # one unit per class: the signals that share its work share one pass of it
        by_unit.setdefault(UNITS.get(w), []).append(w)
    units = [cls(names, base, head, options) for cls, names in by_unit.items()]
    model.eval()
    # the batch is built on the CPU and moved to the model's device; results come back as float64 numpy
    device = next(model.parameters()).device
    lengths = [len(prompt_ids[i]) + len(response_ids[i]) for i in range(n)]
    for idx in token_batches(lengths, batch_size, max_batch_tokens):
        seqs = [list(prompt_ids[i]) + list(response_ids[i]) for i in idx]
        plen = [len(prompt_ids[i]) for i in idx]
        rlen = [len(response_ids[i]) for i in idx]
        t = max(map(len, seqs))
        ids = torch.full((len(seqs), t), 0, dtype=torch.long)
        attn = torch.zeros((len(seqs), t), dtype=torch.long)
        resp = torch.zeros((len(seqs), t), dtype=torch.bool)  # response token positions
        for b, s in enumerate(seqs):  # right padding: real tokens keep positions 0..n-1
            ids[b, : len(s)] = torch.tensor(s)
            attn[b, : len(s)] = 1
            resp[b, plen[b]: plen[b] + rlen[b]] = True
        batch = ForwardBatch(idx, ids.to(device), attn.to(device), resp.to(device), plen, rlen)
        hooks = [h for u in units for h in u.hooks(batch)]
        try:
            with torch.no_grad():
                last = base(input_ids=batch.ids, attention_mask=batch.attn, use_cache=False).last_hidden_state
        finally:
            for h in hooks:
                h.remove()
        for u in units:
            u.collect(batch, last, out)
    return out


def token_batches(lengths: Sequence[int], batch_size: int, max_tokens: int | None = None) -> list[list[int]]:
    """Sequence indices grouped into forwards: longest first (ties in index order), each group at most
    ``batch_size`` sequences and, with ``max_tokens``, at most ``max_tokens`` padded tokens (group size x
    its longest sequence, the first); a sequence longer than the budget is a group of its own."""
    if batch_size < 1 or (max_tokens is not None and max_tokens < 1):
        raise ValueError(f"batch_size and max_tokens must be >= 1, got {batch_size}, {max_tokens}")
    groups: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        g = groups[-1] if groups else None
        if g is None or len(g) >= batch_size or (max_tokens is not None and (len(g) + 1) * lengths[g[0]] > max_tokens):
            groups.append([i])
        else:
            g.append(i)
    return groups


def step_starts_of(response_ids: Sequence[int], newline_ids: frozenset[int] | set[int]) -> list[int]:
    """Steps split at newlines: a step starts at 0 and after every token that contains a newline."""
    return [0] + [t + 1 for t, tok in enumerate(response_ids) if tok in newline_ids and t + 1 < len(response_ids)]


#: per tokenizer object: (its length when decoded, the ids); the score stage asks once per shard
_NEWLINES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def newline_token_ids(tokenizer) -> frozenset[int]:
    """The token ids whose text contains a newline. The whole vocabulary is decoded once per tokenizer
    (and again only when tokens are added to it), not once per call."""
    n = len(tokenizer)
    hit = _NEWLINES.get(tokenizer)
    if hit is None or hit[0] != n:
        hit = (n, frozenset(i for i in range(n) if "\n" in tokenizer.decode([i])))
        _NEWLINES[tokenizer] = hit
    return hit[1]


# ------------------------------------------------------------------------------ answer signals
def answer_signals(responses: Sequence[str], truncated: Sequence[bool], target: str | None) -> dict:
    """Per question: extracted answers, rewards (None without a target), the vote, consistency."""
    from devenus.verify import extract_answer, get_default_verifier, majority_vote

    preds = [extract_answer(r, truncated=t) for r, t in zip(responses, truncated)]
    vote = majority_vote(preds)
    g = len(preds)
    sizes = vote.cluster_sizes
    own = np.array([sizes[c] if c is not None else 1 for c in vote.cluster_of], dtype=np.float64)
    largest = max(max(sizes, default=0), 1 if vote.n_abstain else 0)  # abstentions are singletons
    labeled = target is not None and str(target).strip() != ""
    rewards = None
    majority_correct = None
    if labeled:
        v = get_default_verifier()
        rewards = np.array([1.0 if p is not None and v.equivalent(p, str(target)) else 0.0 for p in preds])
        majority_correct = bool(vote.target is not None and v.equivalent(vote.target, str(target)))
    return {
        "preds": preds, "cluster": [-1 if c is None else c for c in vote.cluster_of], "agrees": list(vote.agrees),
        "u_consistency_sample": 1.0 - own / g, "consistency": 1.0 - largest / g,
        "majority": vote.target, "majority_ratio": vote.majority_ratio, "rewards": rewards,
        "majority_correct": majority_correct,
    }


def aggregate(values: np.ndarray, how: str, agrees: np.ndarray | None = None) -> float:
    """One question's samples -> one score (``mean`` | ``median`` | ``majority``); NaNs ignored."""
    v = np.asarray(values, dtype=np.float64)
    if how == "majority" and agrees is not None and np.any(agrees):
        v = v[np.asarray(agrees, bool)]
    v = v[~np.isnan(v)]
    if v.size == 0:
        return float("nan")
    return float(np.median(v)) if how == "median" else float(v.mean())


def aggregate_matrix(values: np.ndarray, how: str, agrees: np.ndarray | None = None) -> np.ndarray:
    """:func:`aggregate` for N questions at once: ``values`` ``[N, G]`` (NaN = missing) -> ``[N]``,
    vectorised (the majority rule falls back to all samples for a question without a winner)."""
    v = np.asarray(values, dtype=np.float64)
    if how == "majority" and agrees is not None:
        a = np.asarray(agrees, bool)
        v = np.where(a.any(axis=1, keepdims=True) & ~a, np.nan, v)
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows give NaN, as aggregate() does
            return np.nanmedian(v, axis=1) if how == "median" else np.nanmean(v, axis=1)
