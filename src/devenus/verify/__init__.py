"""Answer verification for verifiable-reward RL: extraction, normalisation, time-bounded
equivalence, majority voting, grading and the verl reward function. verl-free by design."""

from .choice import OPTION_LETTERS, choice_letter, target_letter
from .equivalence import UNMATCHABLE, Verifier, VerifierConfig, VerifierStats, get_default_verifier
from .extract import ExtractConfig, extract_answer
from .grading import GradeResult, grade
from .normalize import ParsedNumber, as_number, normalize, parse_number
from .reward import compute_score
from .vote import VoteResult, majority_vote

__all__ = [
    "UNMATCHABLE",
    "ExtractConfig",
    "extract_answer",
    "OPTION_LETTERS",
    "choice_letter",
    "target_letter",
    "normalize",
    "as_number",
    "parse_number",
    "ParsedNumber",
    "Verifier",
    "VerifierConfig",
    "VerifierStats",
    "get_default_verifier",
    "VoteResult",
    "majority_vote",
    "GradeResult",
    "grade",
    "compute_score",
]
