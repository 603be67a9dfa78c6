"""Scoring: per-sample signals and their per-question aggregates, every one "higher = more uncertain".

Answer signals (from the G responses, via :mod:`devenus.verify`):

- ``accuracy``: ``u = 1 - p`` with ``p`` the pass rate against the row's label (labeled rows only;
  the per-sample value is ``1 - reward``). Question-level: the aggregation does not apply.
- ``consistency``: ``u = 1 - largest equivalent-answer cluster / G``; a response without an answer
  (truncated, none extracted) is a singleton. Question-level; the per-sample value kept is
  ``1 - own cluster / G``.

Model-internal signals, all from ONE teacher-forced forward per (prompt, response) batch, with hooks:

- ``entropy``: ``u = mean over response tokens of H(p_t)`` (full logits width);
- ``self_certainty``: ``u = - mean SC_t``;
- ``coe_r`` / ``coe_c``: ``u = - CoE-R`` / ``- CoE-C`` (higher CoE = more likely correct);
- ``cot_kinetics``: ``u = E``, the mean CoT-Kinetics energy over response tokens (RECONSTRUCTED;
  the sign is our choice: check it with ``route.calibrate_sign``).

The forward runs the decoder without its head: the head is applied to the final hidden states in
token x vocabulary chunks (:func:`devenus.signals.head.token_stats_from_hidden`), so the ``[T, V]``
logits never exist, and each layer's output is pooled over response tokens as it is produced
(:class:`devenus.signals.hidden.LayerPool`), so ``[L, T, d]`` never exists.

Aggregation over a question's G samples: ``mean`` (default), ``median``, or ``majority`` (mean over
the samples in the winning answer cluster; all samples when there is no winner).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from devenus.select.config import MODEL_SIGNALS
from devenus.signals.head import token_stats_from_hidden
from devenus.signals.hidden import KineticsPool, LayerPool, coe_scores


# ------------------------------------------------------------------------------ the forward
def _decoder_parts(model):
    base = getattr(model, model.base_model_prefix, None)
    head = model.get_output_embeddings()
    if base is None or head is None or not hasattr(base, "layers") or not hasattr(base, "norm"):
        raise ValueError(f"{type(model).__name__}: expected a decoder-only model with .layers, .norm and an output head")
    return base, head


def forward_signals(model, prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]],
                    want: Sequence[str] = MODEL_SIGNALS, *, batch_size: int = 32, token_chunk: int = 512,
                    vocab_chunk: int = 8192, temperature: float = 1.0) -> dict[str, np.ndarray]:
    """Raw model-internal scores per (prompt, response): ``entropy`` (mean H), ``self_certainty``
    (mean SC), ``coe_r``, ``coe_c``, ``cot_kinetics`` (mean energy); float64 arrays of length
    ``len(response_ids)``."""
    want = [w for w in want if w in MODEL_SIGNALS]
    n = len(response_ids)
    out = {w: np.full(n, np.nan) for w in want}
    if not want or n == 0:
        return out
    base, head = _decoder_parts(model)
    tokens = any(w in ("entropy", "self_certainty") for w in want)
    coe = any(w in ("coe_r", "coe_c") for w in want)
    kin = "cot_kinetics" in want
    model.eval()
    for start in range(0, n, batch_size):
        idx = range(start, min(start + batch_size, n))
        seqs = [list(prompt_ids[i]) + list(response_ids[i]) for i in idx]
        plen = [len(prompt_ids[i]) for i in idx]
        rlen = [len(response_ids[i]) for i in idx]
        t = max(map(len, seqs))
        pad = 0
        ids = torch.full((len(seqs), t), pad, dtype=torch.long)
        attn = torch.zeros((len(seqs), t), dtype=torch.long)
        resp = torch.zeros((len(seqs), t), dtype=torch.bool)  # response token positions
        for b, s in enumerate(seqs):  # right padding: real tokens keep positions 0..n-1
            ids[b, : len(s)] = torch.tensor(s)
            attn[b, : len(s)] = 1
            resp[b, plen[b]: plen[b] + rlen[b]] = True
        pool = LayerPool(resp) if coe else None
        kinetics = KineticsPool(resp) if kin else None
        hooks = []
        if pool is not None or kinetics is not None:
            mods = [base.embed_tokens, *list(base.layers)[:-1], base.norm]  # HF's hidden_states order

            def take(li, output):
                h = output[0] if isinstance(output, tuple) else output
                if pool is not None:
                    pool.add(li, h)
                if kinetics is not None:
                    kinetics.add(li, h)
            for li, mod in enumerate(mods):
                hooks.append(mod.register_forward_hook(lambda _m, _inp, output, li=li: take(li, output)))
        try:
            with torch.no_grad():
                last = base(input_ids=ids, attention_mask=attn, use_cache=False).last_hidden_state
        finally:
            for h in hooks:
                h.remove()
        if tokens:
            # the distribution at position i predicts token i+1: response tokens are predicted from i-1
            pred_pos = torch.zeros_like(resp)
            pred_pos[:, :-1] = resp[:, 1:]
            rows, cols = pred_pos.nonzero(as_tuple=True)
            stats = token_stats_from_hidden(last[rows, cols], head.weight, getattr(head, "bias", None),
                                            temperature=temperature, token_chunk=token_chunk, vocab_chunk=vocab_chunk)
            count = torch.zeros(len(seqs), dtype=torch.float64).index_add_(0, rows, torch.ones(len(rows), dtype=torch.float64))
            for name in ("entropy", "self_certainty"):
                if name in want:
                    s = torch.zeros(len(seqs), dtype=torch.float64).index_add_(0, rows, stats[name].double())
                    out[name][start: start + len(seqs)] = (s / count.clamp(min=1)).numpy()
        if pool is not None:
            c = coe_scores(pool.means())
            for name in ("coe_r", "coe_c"):
                if name in want:
                    out[name][start: start + len(seqs)] = c[name].numpy()
        if kinetics is not None:
            out["cot_kinetics"][start: start + len(seqs)] = kinetics.energy().numpy()
    return out


def uncertainty(name: str, raw: np.ndarray) -> np.ndarray:
    """A raw model-internal score as "higher = more uncertain"."""
    return raw if name in ("entropy", "cot_kinetics") else -raw


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
