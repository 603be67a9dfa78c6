"""DataProto-level realisation of the four surfaces (verl's native contracts on both sides).

Every function keeps tensor and non-tensor fields row-aligned: a filter is one aligned selection, a
reward is written at the last valid response token, a weight scales only the intended rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from verl import DataProto

from devenus.online.noise import REDRAW_FIELD, redraw_marks
from devenus.online.rollouts import RolloutBatch, label_states, truncated_rows

# non-tensor keys DE-Venus adds to a training batch (they travel through verl's balance/reorder)
TARGET_KEY = "devenus_target"  # the target each row was scored against after S_y
CONSTRUCTED_KEY = "devenus_constructed"  # rows whose target S_y substituted (what S_r/S_b/S_a see of S_y)
HIDDEN_KEY = "devenus_hidden"  # simulation truth per row, for mechanism metrics only (verl pops `simulation`)
ADMIT_KEY = "devenus_admit"  # S_b decision per row
WEIGHT_KEY = "devenus_adv_weight"  # S_a weight per row


def response_mask(data: DataProto) -> torch.Tensor:
    """[rows, response_len] mask of valid response tokens (verl's own rule when the key is absent)."""
    if "response_mask" in data.batch.keys():
        return data.batch["response_mask"]
    resp_len = data.batch["responses"].shape[1]
    return data.batch["attention_mask"][:, -resp_len:]


def last_valid_index(mask: torch.Tensor) -> torch.Tensor:
    """Per row, the position of the last valid token (-1 for a row with no valid token)."""
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
    return torch.where(mask.bool(), positions, torch.full_like(positions, -1)).max(dim=1).values


def place_sequence_scores(token_scores: torch.Tensor, mask: torch.Tensor, scores, rows=None) -> None:
    """In place: for each selected row, zero its token scores and put ``scores[row]`` at its last valid token."""
    scores = torch.as_tensor(np.asarray(scores, dtype=np.float64), dtype=token_scores.dtype)
    rows_idx = torch.arange(token_scores.shape[0]) if rows is None else torch.as_tensor(np.flatnonzero(rows))
    last = last_valid_index(mask)
    for r in rows_idx.tolist():
        token_scores[r].zero_()
        if last[r] >= 0:
            token_scores[r, last[r]] = scores[r]


def select_rows(data: DataProto, idx) -> DataProto:
    """An aligned selection of rows (bool mask or indices) over tensors and non-tensors alike."""
    idx = np.asarray(idx)
    if idx.dtype == bool:
        if len(idx) != len(data):
            raise ValueError(f"selection mask has {len(idx)} rows, data has {len(data)}")
        idx = np.flatnonzero(idx)
    return data.select_idxs(idx)


def append_rows(first: DataProto, more: DataProto) -> DataProto:
    """``first``'s rows then ``more``'s (same columns and widths), with ``first``'s meta_info only:
    ``DataProto.concat`` asserts equal meta_info, and two generate calls never time alike."""
    keys = lambda d: (None if d.batch is None else sorted(d.batch.keys()), sorted(d.non_tensor_batch))  # noqa: E731
    if keys(first) != keys(more):
        raise ValueError(f"cannot append rows with other columns: {keys(first)} vs {keys(more)}")
    batch = None if first.batch is None else torch.cat([first.batch, more.batch], dim=0)
    non_tensor = {k: np.concatenate([v, more.non_tensor_batch[k]], axis=0) for k, v in first.non_tensor_batch.items()}
    return DataProto(batch=batch, non_tensor_batch=non_tensor, meta_info=dict(first.meta_info))


def apply_admission(data: DataProto, keep: np.ndarray) -> int:
    """Zero-weight padding for dropped groups: their response tokens leave the loss (mask and advantage 0).

    Why padding rather than removal: verl's step holds the batch size fixed between generation and
    update (union with the repeated prompts, mini-batch and dp divisibility), so dropped groups stay in
    the batch with no weight. Returns the number of rows dropped.
    """
    keep = np.asarray(keep, dtype=bool)
    drop = torch.as_tensor(~keep)
    if not drop.any():
        return 0
    mask = data.batch["response_mask"].clone()
    mask[drop] = 0
    data.batch["response_mask"] = mask
    if "advantages" in data.batch.keys():
        adv = data.batch["advantages"].clone()
        adv[drop] = 0
        data.batch["advantages"] = adv
    return int(drop.sum())


def scale_advantages(data: DataProto, weights: np.ndarray) -> None:
    """Multiply each row's advantages by its weight (the step rules keep weights in [0, 1])."""
    w = np.asarray(weights, dtype=np.float64)
    if len(w) != len(data):
        raise ValueError(f"{len(w)} advantage weights for {len(data)} rows")
    if (w == 1).all():
        return
    data.batch["advantages"] = data.batch["advantages"] * torch.as_tensor(w, dtype=data.batch["advantages"].dtype)[:, None]


def row_reward_advantage(data: DataProto) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: the sequence reward, the mean advantage over valid tokens, and whether it has any."""
    mask = data.batch["response_mask"].bool()
    reward = data.batch["token_level_rewards"].sum(dim=1)
    adv = (data.batch["advantages"] * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
    return reward.cpu().numpy(), adv.cpu().numpy(), mask.any(dim=1).cpu().numpy()


# ---------------------------------------------------------------------------------------- views
def _column(non_tensor: dict[str, Any], key: str, n: int, default=None) -> np.ndarray:
    return non_tensor[key] if key in non_tensor else np.full(n, default, dtype=object)


def label_state(extra_info: np.ndarray, reward_model: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(labeled, target, key) per row from verl's ``extra_info`` and ``reward_model`` columns, by the one
    rule in :func:`devenus.online.rollouts.row_identity` (a row without ``extra_info.index`` is an error)."""
    return label_states(extra_info, reward_model, where="batch row")


def stop_token_ids(tokenizer) -> set[int]:
    """Token ids that end a response on its own (the tokenizer's EOS and the chat template's end markers)."""
    eos = getattr(tokenizer, "eos_token_id", None)
    ids = {int(eos)} if eos is not None else set()
    convert = getattr(tokenizer, "convert_tokens_to_ids", None)
    for tok in ("<|im_end|>", "<|endoftext|>") if convert is not None else ():
        tid = convert(tok)
        if isinstance(tid, int) and tid != getattr(tokenizer, "unk_token_id", None):
            ids.add(tid)
    return ids


def rollout_view(
    prompts: DataProto,
    outputs: DataProto,
    tokenizer,
    step: int,
    decode: bool = False,
) -> RolloutBatch:
    """The verl-free view of one step's rollouts (``prompts`` and ``outputs`` in the same row order)."""
    from devenus.verify import extract_answer

    n = len(outputs)
    nt = prompts.non_tensor_batch
    labeled, target, key = label_state(_column(nt, "extra_info", n, {}), _column(nt, "reward_model", n, {}))
    mask = response_mask(outputs)
    length = mask.sum(dim=1).cpu().numpy().astype(np.int64)
    last = outputs.batch["responses"].gather(1, torch.as_tensor(np.maximum(length - 1, 0))[:, None]).squeeze(1)
    truncated = truncated_rows(length, mask.shape[1], last.cpu().numpy(), stop_token_ids(tokenizer))
    marks = redraw_marks(nt.get("simulation"))  # simulated active noise: re-graded after the redraw
    texts = None
    if decode or marks is not None or "pred" not in outputs.non_tensor_batch:
        ids = outputs.batch["responses"]
        texts = [tokenizer.decode(ids[i, : length[i]].tolist(), skip_special_tokens=True) for i in range(n)]
    if "pred" in outputs.non_tensor_batch:
        pred = [p if p not in ("", None) else None for p in outputs.non_tensor_batch["pred"]]
    else:
        pred = [extract_answer(t, truncated=bool(tr)) for t, tr in zip(texts, truncated)]
    score = outputs.batch["rm_scores"].sum(dim=1).cpu().numpy().astype(np.float64)
    fields = {k: nt[k] for k in ("data_source",) if k in nt}
    fields["extra_info"] = _column(nt, "extra_info", n, {})
    if marks is not None:
        fields[REDRAW_FIELD] = marks  # StepRules removes it before any method sees the view
    return RolloutBatch(
        uid=np.asarray(nt["uid"], dtype=object),
        key=key,
        labeled=labeled,
        target=target,
        pred=pred,
        score=score,
        response_length=length,
        truncated=truncated,
        step=step,
        response=texts,
        fields=fields,
    )
