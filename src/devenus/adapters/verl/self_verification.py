"""Self-verification: the policy judges a candidate answer; the signal is its verdict probability.

For every distinct (question, candidate answer) of a step the method's template becomes a user turn
(chat template of the policy's tokenizer, generation prompt on), and the actor scores two one-turn
replies, the "yes" and the "no" verdict, with verl's own log-prob pass on the actor workers
(``RayPPOTrainer._compute_old_log_prob``: the same engine, sharding and micro-batching as the step's
log-probs). ``P(yes) = sigmoid(log p(yes) - log p(no))``, so the two verdicts' probabilities are
renormalised against each other. It runs after the step's log-prob pass (when a colocated rollout
engine has released the accelerator), on ``2 x distinct answers`` short sequences.
"""

from __future__ import annotations

import numpy as np
import torch
from verl import DataProto
from verl.protocol import pad_dataproto_to_divisor, unpad_dataproto
from verl.trainer.ppo.ray_trainer import RayPPOTrainer

from devenus.signals import sum_log_prob, verdict_probability


def question_text(non_tensor: dict, i: int) -> str:
    """The row's question: the last user turn of ``raw_prompt`` (verl's dataset keeps the messages),
    else ``extra_info.question``."""
    raw = non_tensor.get("raw_prompt")
    if raw is not None:
        msgs = raw[i]
        users = [m.get("content", "") for m in (msgs if isinstance(msgs, (list, tuple, np.ndarray)) else [])
                 if isinstance(m, dict) and m.get("role") == "user"]
        if users and isinstance(users[-1], str):
            return users[-1]
    info = non_tensor.get("extra_info")
    q = (info[i] or {}).get("question") if info is not None else None
    if not q:
        raise ValueError(f"self-verification needs the question text of row {i}: the batch has no raw_prompt "
                         f"and extra_info.question is empty")
    return str(q)


def verification_prompts(tokenizer, questions: list[str], answers: list[str], template: str) -> list[list[int]]:
    """Token ids of each verification turn, through the policy's chat template (generation prompt on)."""
    out = []
    for q, a in zip(questions, answers):
        text = tokenizer.apply_chat_template([{"role": "user", "content": template.format(question=q, answer=a)}],
                                             add_generation_prompt=True, tokenize=False)
        out.append(tokenizer.encode(text, add_special_tokens=False))
    return out


def _pack(tokenizer, prompts: list[list[int]], replies: list[list[int]]) -> DataProto:
    """Left-padded prompts + right-padded replies, in the layout verl's log-prob pass expects."""
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    n, P, R = len(prompts), max(map(len, prompts)), max(map(len, replies))
    p_ids = torch.full((n, P), pad, dtype=torch.long)
    r_ids = torch.full((n, R), pad, dtype=torch.long)
    p_mask = torch.zeros(n, P, dtype=torch.long)
    r_mask = torch.zeros(n, R, dtype=torch.long)
    for i, (p, r) in enumerate(zip(prompts, replies)):
        p_ids[i, P - len(p):], p_mask[i, P - len(p):] = torch.tensor(p), 1
        r_ids[i, : len(r)], r_mask[i, : len(r)] = torch.tensor(r), 1
    attention = torch.cat([p_mask, r_mask], dim=1)
    return DataProto.from_dict(
        tensors={"prompts": p_ids, "responses": r_ids, "input_ids": torch.cat([p_ids, r_ids], dim=1),
                 "attention_mask": attention, "position_ids": (attention.cumsum(dim=1) - 1).clamp(min=0),
                 "response_mask": r_mask},
        meta_info={"temperature": 1.0},
    )


def verdict_probabilities(trainer: RayPPOTrainer, questions: list[str], answers: list[str], template: str,
                          verdicts: tuple[str, str]) -> np.ndarray:
    """P(yes verdict) per (question, answer), from the actor's current weights."""
    if not questions:
        return np.zeros(0)
    tok = trainer.tokenizer
    prompts = verification_prompts(tok, questions, answers, template)
    replies = [tok.encode(v, add_special_tokens=False) for v in verdicts]
    if not all(replies):
        raise ValueError(f"a verdict encodes to no tokens: {verdicts}")
    data = _pack(tok, [p for p in prompts for _ in verdicts], [r for _ in prompts for r in replies])
    # verl splits the pass into micro-batches of a fixed size per rank (unless dynamic batch size is on)
    micro = trainer.config.actor_rollout_ref.rollout.get("log_prob_micro_batch_size_per_gpu", None) or 1
    dynamic = trainer.config.actor_rollout_ref.rollout.get("log_prob_use_dynamic_bsz", False)
    data, pad = pad_dataproto_to_divisor(data, trainer.actor_rollout_wg.world_size * (1 if dynamic else int(micro)))
    data.meta_info["global_token_num"] = data.batch["attention_mask"].sum(dim=-1).tolist()  # verl reports MFU from it
    out, _ = RayPPOTrainer._compute_old_log_prob(trainer, data)  # verl's pass, without DE-Venus's hooks
    out = unpad_dataproto(out, pad)
    data = unpad_dataproto(data, pad)
    lp = sum_log_prob(out.batch["old_log_probs"], data.batch["response_mask"]).reshape(len(prompts), len(verdicts))
    return verdict_probability(lp[:, 0], lp[:, 1])
