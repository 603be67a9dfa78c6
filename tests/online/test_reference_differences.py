"""Where DE-Venus deliberately differs from each method's reference implementation (docs/methods/*.md,
"Differences from the reference"): one test per documented point, so a change is a visible decision.

The reference side is re-derived here in a few lines of plain python/torch from the reference code
(cited per test), never by calling DE-Venus twice.
"""

import importlib.util
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from batches import token_stats_batch, vote_batch
from devenus.online.method import OnlineMethod
from devenus.online.registry import WeakTrainerInterface
from devenus.signals import (
    cosine_alpha,
    distinct_candidates,
    ema_update_,
    entropy_from_logits,
    self_certainty_from_logits,
    token_stats_from_logits,
    verdict_probability,
)
from devenus.verify import compute_score, extract_answer, grade, majority_vote


def build(name, **cfg):
    return WeakTrainerInterface.get(name).build(cfg)


def groups_batch(groups, vote_only=None):
    """``groups``: (answers, extra_info extras) per unlabeled prompt."""
    return vote_batch([(False, "", answers, extras) for answers, extras in groups], vote_only)


def reference_first_seen_vote(answers):
    """Counter(...).most_common(1): the most frequent string, the first-seen one among equals
    (PRIME-RL/TTRL ttt_metrics.py; tmlr-group/Co-rewarding co_reward.py and co_rewarding_II.py)."""
    return Counter(answers).most_common(1)[0][0]


def grpo_advantages(scores, groups, eps=1e-6):
    """verl's GRPO outcome advantage: (r - mean) / (unbiased std + eps) per group."""
    r = torch.as_tensor(np.asarray(scores, dtype=np.float64))
    out = torch.zeros_like(r)
    for g in np.unique(groups):
        idx = torch.as_tensor(np.flatnonzero(np.asarray(groups) == g))
        x = r[idx]
        out[idx] = (x - x.mean()) / (x.std() + eps) if len(x) > 1 else torch.zeros_like(x)
    return out.numpy()


def reference_sc(logits, temperature=1.0):
    """The references' self-certainty: logsumexp(z/T) - mean(z/T) over the full logits width (float64)."""
    z = logits.double() / temperature
    return torch.logsumexp(z, dim=-1) - z.mean(dim=-1)


def urlvr_masked_mean(values, mask):
    """verl's masked_mean as URLVR uses it: sum(v * m) / (sum(m) + 1e-8)."""
    v, m = torch.as_tensor(values, dtype=torch.float64), torch.as_tensor(mask, dtype=torch.float64)
    return ((v * m).sum(-1) / (m.sum(-1) + 1e-8)).numpy()


# ------------------------------------------------------------------------------------------ TTRL
def test_ttrl_tie_gives_no_target_reference_takes_first_seen():
    answers = ["1", "2", "2", "1"]
    assert reference_first_seen_vote(answers) == "1"  # the reference labels the group "1"
    m = build("ttrl")
    assert list(m.construct_targets(groups_batch([(answers, {})]))) == [None] * 4
    assert m.pop_metrics()["tie_share"] == 1.0


def test_ttrl_empty_answer_abstains_and_cannot_win():
    answers = [None, None, None, "7"]
    # reference: no answer extracts as "" and is counted; "" wins and grade_answer("", "") is true,
    # so the three responses without an answer are rewarded
    ref = reference_first_seen_vote(["" if a is None else a for a in answers])
    assert ref == "" and [float(("" if a is None else a) == ref) for a in answers] == [1.0, 1.0, 1.0, 0.0]
    m = build("ttrl")
    assert list(m.construct_targets(groups_batch([(answers, {})]))) == ["7"] * 4
    v = majority_vote(answers)
    assert v.n_abstain == 3 and v.majority_ratio == 0.25  # abstentions count in the group size
    assert grade("I am not sure.", "7").score == 0.0 and grade("so \\boxed{7}", "7").score == 1.0
    assert majority_vote(["", "  ", None]).target is None  # empty strings abstain too; nobody answered
    assert list(m.construct_targets(groups_batch([([None] * 4, {})]))) == [None] * 4


def test_truncated_response_has_no_answer():
    text = "2 + 3 = \\boxed{5} and then 5 + 5 = 1"
    reference = text.split("\\boxed{")[-1].split("}")[0]  # the reference extracts a truncated text as usual
    assert extract_answer(text) == reference == "5"
    assert extract_answer(text, truncated=True) is None


def test_extraction_has_no_last_number_fallback():
    """ttrl.md point 5: the reference's extract_answer (qwen_math_parser.py) falls back to the last number in
    the text; a number in the middle of a derivation is no answer here."""
    import re

    text = "First 12 + 30 = 42, then we carry the 1 and get"
    reference = re.findall(r"-?\d+(?:\.\d+)?", text)[-1]  # the reference's last-number fallback
    assert reference == "1"
    assert extract_answer(text) is None
    assert extract_answer(text + " the answer is 43") == "43"  # an explicit phrase still counts, on both sides


def test_ttrl_equivalent_answers_vote_together():
    answers = ["3", "3", "3", "0.5", "0.5", "\\frac{1}{2}", "\\frac{1}{2}"]
    assert reference_first_seen_vote(answers) == "3"  # exact strings: 3 beats two split halves
    new = build("ttrl").construct_targets(groups_batch([(answers, {})]))
    assert len(set(new)) == 1 and new[0] in {"0.5", "\\frac{1}{2}"}  # four halves beat three 3s


def test_vote_on_n_drops_extra_rollouts_before_log_prob_passes():
    pytest.importorskip("verl")
    # the trainer-without-workers and fake rollout of tests/adapters/verl/test_votes.py (kept current there)
    path = Path(__file__).parents[1] / "adapters" / "verl" / "test_votes.py"
    spec = importlib.util.spec_from_file_location("_votes_helpers", path)
    votes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(votes)
    groups = [["1", "2", "2", "2"], ["5", "5", "6", "6"], ["7", "8", None, "8"]]
    b, m_train, n_votes = len(groups), 2, 4
    t, fake = votes.trainer_with("ttrl", m_train, groups, votes=n_votes)
    out = t.async_rollout_manager.generate_sequences(votes.prompts_for(groups, m_train))
    reference_log_prob_rows = b * n_votes  # reference (main): old and ref log-probs on all N, then top-M
    assert len(fake.calls[0]) == b * n_votes  # all N were generated and voted on
    assert len(out) == b * m_train < reference_log_prob_rows  # verl's log-prob passes get M per prompt
    assert out.batch["rollout_j"].tolist() == [0, 1] * b  # the first M sampled of each group


# ---------------------------------------------------------------------------------- Co-rewarding I
def test_corewarding_partner_vote_and_reward_use_equivalence():
    pair = {"pair_key": "p0"}
    original = ["0.5", "\\frac{1}{2}", " 0.5", "2"]
    rewrite = ["3", "3", "3", "0.5", "0.5", "\\frac{1}{2}", "\\frac{1}{2}"]
    ref_label = reference_first_seen_vote(rewrite)  # raw strings: "3"
    new = build("corewarding").construct_targets(groups_batch([(original, pair), (rewrite, pair)]))
    target = new[0]
    assert set(new[:4]) == {target} and target in {"0.5", "\\frac{1}{2}"} and ref_label == "3"
    # reward of the original's responses: the reference needs the identical string (ans == pseudo_label),
    # DE-Venus grades equivalence; even the reference's own label would miss " 0.5" against "0.5"
    ours = [grade(f"\\boxed{{{a}}}", target).score for a in original]
    assert ours == [1.0, 1.0, 1.0, 0.0]
    assert [float(a == target) for a in original].count(1.0) == 1  # exact match: only one spelling scores


def test_corewarding_partner_tie_gives_no_target():
    pair = {"pair_key": "p0"}
    assert reference_first_seen_vote(["1", "2"]) == "1"
    new = build("corewarding").construct_targets(groups_batch([(["1", "1", "1"], pair), (["1", "2"], pair)]))
    assert list(new[:3]) == [None] * 3  # the original's partner tied
    assert list(new[3:]) == ["1", "1"]  # the rewrite's partner agrees on 1


def test_corewarding_use_partner_label():
    pair = {"pair_key": "p0"}
    groups = [(True, "5", ["4", "4", "4", "4"], pair), (False, "", ["7", "7", "4", "4"], pair)]
    # reference: no labels; the unlabeled view takes its partner's majority, "4"
    assert reference_first_seen_vote(groups[0][2]) == "4"
    assert list(build("corewarding").construct_targets(vote_batch(groups))[4:]) == ["5"] * 4
    assert list(build("corewarding", use_partner_label=False).construct_targets(vote_batch(groups))[4:]) == ["4"] * 4


# --------------------------------------------------------------------------------- Co-rewarding II
def test_corewarding2_alpha_schedule_and_ema():
    s, e, total = 0.01, 1e-5, 10
    ours = [cosine_alpha(u, total, s, e) for u in range(1, total + 1)]
    assert ours == pytest.approx([e + (s - e) * (1 + math.cos(math.pi * (u - 1) / (total - 1))) / 2
                                  for u in range(1, total + 1)], rel=1e-12)
    # reference (fsdp_vllm.py update_alpha): alpha(step) with T = total steps, applied before the step's
    # generation, so the u-th student update enters the teacher with alpha(u + 1); the T-th never does
    ref = [e + 0.5 * (s - e) * (1 + math.cos(math.pi * min(u, total) / total)) for u in range(1, total)]
    assert ours[0] == s and ref[0] < s  # our first update gets alpha_start, theirs was spent at step 1
    assert ours[-1] == e and min(ref) > e  # we reach alpha_end; the reference does not within the run
    # the EMA itself is the reference's p_ref.mul_(1 - alpha).add_(p_pol, alpha=alpha)
    g = torch.Generator().manual_seed(0)
    teacher, student = {"w": torch.randn(5, 3, generator=g)}, {"w": torch.randn(5, 3, generator=g)}
    expected = teacher["w"].clone().mul_(1 - 0.3).add_(student["w"], alpha=0.3)
    ema_update_(teacher, student, 0.3)
    assert torch.allclose(teacher["w"], expected, atol=1e-7)


def test_corewarding2_update_count_survives_resume():
    m = build("corewarding2")
    for _ in range(3):
        m.teacher_updated(m.teacher_alpha(10), 0.0)
    resumed = build("corewarding2")
    resumed.load_state_dict(m.state_dict())
    assert resumed.teacher_alpha(10) == m.teacher_alpha(10) == cosine_alpha(4, 10, 0.01, 1e-5)
    assert build("corewarding2").teacher_alpha(10) == 0.01  # a fresh teacher would restart the schedule
    with pytest.raises(KeyError):
        build("corewarding2").load_state_dict({})  # a resume without the method state is an error


def test_corewarding2_teacher_tie_gives_no_target():
    teacher_votes = ["2", "3"]
    assert reference_first_seen_vote(teacher_votes) == "2"
    b = groups_batch([(["1", "1"] + teacher_votes, {}), (["4", "5"] + ["6", "6"], {})],
                     vote_only=[False, False, True, True] * 2)
    new = build("corewarding2").construct_targets(b)
    assert list(new[:2]) == [None, None] and list(new[4:6]) == ["6", "6"]


# ---------------------------------------------------------------------------------------- Intuitor
def random_logits(shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(*shape, generator=g) * 3
    z[..., 0] += 6 * torch.rand(shape[:-1], generator=g)  # some peaked distributions
    return z.to(dtype)


def test_self_certainty_is_reference_minus_log_v():
    logits = random_logits((6, 9, 50))
    diff = self_certainty_from_logits(logits).double() - reference_sc(logits)
    assert torch.allclose(diff, torch.full_like(diff, -math.log(50)), atol=1e-5)


def test_self_certainty_group_advantages_equal_the_references():
    lengths = [7, 3, 5, 6, 2, 7, 4, 1]
    b = token_stats_batch(["1"] * 8, lengths, group_size=4, width=7)
    logits = random_logits((8, 7, 64), seed=1)
    b.token_stats["self_certainty"] = self_certainty_from_logits(logits)
    ours = build("intuitor").construct_rewards(b)
    mask = b.token_stats["response_mask"]
    theirs = urlvr_masked_mean(reference_sc(logits), mask)  # verl-intuitor: masked_mean of its SC
    assert np.allclose(ours - theirs, -math.log(64), atol=1e-5)
    groups = np.repeat([0, 1], 4)
    assert np.allclose(grpo_advantages(ours, groups), grpo_advantages(theirs, groups), atol=1e-5)


def test_self_certainty_uses_tempered_logits():
    logits = random_logits((4, 10, 30), seed=2)
    ours = self_certainty_from_logits(logits, temperature=0.7).double()
    assert torch.allclose(ours, reference_sc(logits, 0.7) - math.log(30), atol=1e-5)
    assert (ours - (reference_sc(logits) - math.log(30))).abs().max() > 0.1  # T really applies


def test_self_certainty_uses_the_full_logits_width():
    logits = random_logits((40, 12), seed=3)  # 8 "tokenizer" rows + 4 padding rows
    ours = self_certainty_from_logits(logits).double()
    assert torch.allclose(ours, reference_sc(logits) - math.log(12), atol=1e-5)
    tokenizer_only = reference_sc(logits[:, :8]) - math.log(8)
    assert (ours - tokenizer_only).std() > 1e-2  # the padding rows change SC, and not by a constant


def test_self_certainty_is_unbounded_above():
    vocab = 384
    logits = torch.zeros(1, vocab)
    logits[0, 0] = 80.0
    sc = self_certainty_from_logits(logits).double()
    ref = reference_sc(logits) - math.log(vocab)
    assert torch.allclose(sc, ref, atol=1e-4) and float(sc) > 73 > math.log(vocab)
    h = entropy_from_logits(random_logits((5, 9, vocab), seed=4))
    assert (h >= -1e-6).all() and (h <= math.log(vocab) + 1e-5).all()  # entropy, unlike SC, is bounded


@pytest.mark.parametrize("dtype, temperature", [(torch.float32, 1.0), (torch.float32, 0.7), (torch.bfloat16, 0.7)])
def test_chunked_statistics_equal_unchunked(dtype, temperature):
    logits = random_logits((3, 11, 97), seed=5, dtype=dtype)
    chunked = token_stats_from_logits(logits, chunk_size=4, temperature=temperature)
    whole = token_stats_from_logits(logits, chunk_size=10_000, temperature=temperature)
    z = logits.double() / temperature  # float64 reference, on the same (possibly bf16) values
    logp = torch.log_softmax(z, dim=-1)
    ref = {"self_certainty": reference_sc(logits, temperature) - math.log(97),
           "entropy": -(logp.exp() * logp).sum(-1)}
    for k in ("self_certainty", "entropy"):
        assert torch.equal(chunked[k], whole[k])
        assert torch.allclose(chunked[k].double(), ref[k], atol=1e-4)


# -------------------------------------------------------------------------------------------- EMRL
def test_emrl_token_entropy_is_a_mean_over_tokens():
    b = token_stats_batch(["1"] * 4, [2, 6, 4, 6], width=6)
    b.token_stats["entropy"] = torch.full((4, 6), 0.5)
    ours = build("emrl", variant="token_entropy").construct_rewards(b)
    assert np.allclose(ours, -0.5)  # equally certain per token: equal reward whatever the length
    negative_sum = -(b.token_stats["entropy"] * b.token_stats["response_mask"]).sum(-1).numpy()
    assert len(set(negative_sum.tolist())) == 3  # the paper's wording (a sum) would rank by length
    b = token_stats_batch(["1"] * 4, [2, 6, 4, 5], width=6, seed=3)  # random entropies
    urlvr = urlvr_masked_mean(-b.token_stats["entropy"], b.token_stats["response_mask"])
    assert np.allclose(build("emrl").construct_rewards(b), urlvr, atol=1e-6)


def test_emrl_trajectory_equals_urlvr_mean_log_prob():
    b = token_stats_batch(["1"] * 4, [2, 6, 4, 5], width=6, seed=4)
    urlvr = urlvr_masked_mean(b.token_stats["log_probs"], b.token_stats["response_mask"])
    assert np.allclose(build("emrl", variant="trajectory").construct_rewards(b), urlvr, atol=1e-6)


def test_sequence_prob_is_the_log_and_never_underflows():
    lengths = [70, 80, 90, 100]
    b = token_stats_batch(["1"] * 4, lengths, width=100)
    b.token_stats["log_probs"] = torch.full((4, 100), -1.5)
    ours = build("emrl", variant="sequence_prob").construct_rewards(b)
    assert np.allclose(ours, [-1.5 * n for n in lengths])
    # URLVR's "probability": exp(masked_sum(old_log_probs)) in float32 -> 0 for every row
    urlvr = torch.exp((b.token_stats["log_probs"] * b.token_stats["response_mask"]).sum(-1)).numpy()
    assert (urlvr == 0).all() and (grpo_advantages(urlvr, [0] * 4) == 0).all()  # no signal left
    adv = grpo_advantages(ours, [0] * 4)
    assert np.all(np.diff(adv) < 0)  # ours: shorter = more probable, ordered as exp in exact arithmetic


def test_empty_response_has_no_confidence_score():
    b = token_stats_batch(["1"] * 4, [0, 3, 3, 3], width=4)
    for variant in ("token_entropy", "trajectory", "sequence_prob"):
        assert np.isnan(build("emrl", variant=variant).construct_rewards(b)[0])
    urlvr = urlvr_masked_mean(-b.token_stats["entropy"], b.token_stats["response_mask"])
    assert urlvr[0] == 0.0 and (urlvr[1:] < 0).all()  # URLVR: 0, the best value in the group


# ------------------------------------------------------------------------------------ unsupervised
def test_unsupervised_single_signal_equals_the_urlvr_estimator():
    b = token_stats_batch(["1"] * 8, [2, 6, 4, 5, 6, 1, 3, 6], width=6, seed=6)
    ours = build("unsupervised", w_entropy=1.0, w_agreement=0.0, normalize="none").construct_rewards(b)
    urlvr = urlvr_masked_mean(-b.token_stats["entropy"], b.token_stats["response_mask"])  # token_level_entropy
    assert np.allclose(ours, urlvr, atol=1e-6)
    z = build("unsupervised", w_entropy=1.0, w_agreement=0.0, normalize="zscore").construct_rewards(b)
    groups = np.repeat([0, 1], 4)
    assert np.allclose(grpo_advantages(z, groups), grpo_advantages(urlvr, groups), atol=1e-4)


def test_agreement_tie_scores_zero_for_every_response():
    answers = ["1", "2", "2", "1"]
    label = reference_first_seen_vote(answers)  # URLVR majority_voting: "1" becomes the ground truth
    assert [float(a == label) for a in answers] == [1.0, 0.0, 0.0, 1.0]
    m = build("unsupervised", w_entropy=0.0, w_agreement=1.0, normalize="none")
    assert list(m.construct_rewards(groups_batch([(answers, {}), (["1", "1", "2", None], {})]))) == \
        [0.0] * 4 + [1.0, 1.0, 0.0, 0.0]


def test_self_verification_is_a_probability_once_per_distinct_answer():
    lp_yes, lp_no = np.array([-0.2, -3.0, -1.0]), np.array([-2.5, -0.1, -1.0])
    assert np.allclose(verdict_probability(lp_yes, lp_no), 1 / (1 + np.exp(lp_no - lp_yes)))
    assert verdict_probability(-1.0, -1.0) == 0.5  # undecided, where a parsed verdict says 0 or 1
    preds = ["4", "4", "5", None, "4", "5", "6", "4"]
    urlvr_generations = len(preds)  # one sampled verdict per response
    pairs, idx = distinct_candidates(["q"] * len(preds), preds)
    assert len(pairs) == 3 < urlvr_generations and idx.tolist() == [0, 0, 1, -1, 0, 1, 2, 0]


# -------------------------------------------------------------------------------------------- GRPO
def test_grpo_constructs_nothing():
    grpo = type(build("grpo"))
    for surface in ("construct_targets", "admit", "construct_rewards", "advantage_weights", "extra_rollouts"):
        assert hasattr(OnlineMethod, surface) and not grpo.implements(surface)


def test_reward_reads_the_answer_is_where_verls_math_scorer_does_not():
    pytest.importorskip("verl")
    from verl.utils.reward_score import math_reward  # the reference scorer itself

    assert math_reward.compute_score("The answer is 5", "5") == 0.0
    assert compute_score("any/source", "The answer is 5", "5")["score"] == 1.0
    assert math_reward.compute_score("so \\boxed{5}", "5") == compute_score("x", "so \\boxed{5}", "5")["score"] == 1.0
