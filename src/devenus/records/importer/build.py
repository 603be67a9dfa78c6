"""Stage 4, one record at a time, where the columns do not settle a record: the import's options, the
target by the label mode, and the column values of a plain or multiple-choice record (the records
table is built from them by :func:`.columns.records_table`, as from the column route's), or the row
of a verl-layout record (or its refusal, or its error)."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from ..prompts import PromptFormat, prompt_format
from ..rows import make_row
from ..schema import EXTRA_INFO, EXTRA_INFO_OPTIONAL, EXTRA_INFO_REQUIRED, _pa_scalar_type
from ..validate import Issue, RecordError
from ..versions import Refusal
from .chunks import Raw, _at
from .fields import GPQA_CORRECT, FieldMap, _missing
from .normalise import KeyBuilder, _difficulty, _family, choice_question, normalise_target

#: the values of ``dedupe``
DEDUPE_MODES = (None, "exact")


@dataclass(frozen=True)
class ImportOptions:
    """The settings of one import (the arguments of :func:`import_raw`)."""

    source: str
    data_source: str | None = None
    split: str = "train"
    labeled: bool | str = True
    question_field: str | None = None
    answer_field: str | None = None
    id_field: str | None = None
    ability: str | None = None
    system_prompt: str | None = None
    prompt_template: str | None = None
    hidden_answers: bool = True
    from_verl: bool = False
    #: None (every record is a row) or "exact": exact repeats of a prompt and its target collapsed
    dedupe: str | None = None
    #: a registered format's name, a format file or a PromptFormat (None: "plain"); system_prompt and
    #: prompt_template, when given, replace its system text and instruction
    prompt_format: str | os.PathLike[str] | PromptFormat | None = None

    @functools.cached_property
    def format(self) -> tuple[str, PromptFormat]:
        """``(name, format)`` the prompts are built by (system_prompt / prompt_template applied)."""
        name, fmt = prompt_format(self.prompt_format)
        # (an empty system_prompt is none, as it always was)
        return name, fmt.replace(system=self.system_prompt or None, instruction=self.prompt_template)

    def check(self) -> None:
        if self.dedupe not in DEDUPE_MODES:
            raise ValueError(f"dedupe must be one of {list(DEDUPE_MODES)}, got {self.dedupe!r}")
        if not isinstance(self.source, str) or not self.source.strip():
            raise ValueError(f"source must be a non-empty str, got {self.source!r}")
        if self.labeled not in (True, False, "auto"):
            raise ValueError(f"labeled must be True, False or 'auto', got {self.labeled!r}")
        if self.prompt_template is not None and "{question}" not in self.prompt_template:
            raise ValueError("prompt_template must contain the placeholder '{question}'")
        if self.from_verl and (self.prompt_template is not None or self.system_prompt is not None
                               or self.prompt_format is not None):
            raise ValueError("a verl file's prompt is used as it is: --prompt-format, --prompt-template and "
                             "--system-prompt do not apply with --from-verl")
        if not self.from_verl:
            self.format  # noqa: B018  (an unknown name or a bad file fails here, before any input is read)
        if self.from_verl and (self.question_field or self.answer_field):
            raise ValueError("--from-verl reads prompt[-1].content and reward_model.ground_truth; --question-field/--answer-field do not apply")

    def config(self) -> dict[str, Any]:
        """What the manifest records (JSON values)."""
        cfg = {k: getattr(self, k) for k in self.__dataclass_fields__}
        if cfg["dedupe"] is None:  # (absent when off: an import without it has the manifest it always had)
            del cfg["dedupe"]
        if self.from_verl:
            del cfg["prompt_format"]
        else:  # the format by name and by content: the same name may hold other texts (a file edited)
            name, fmt = self.format
            cfg["prompt_format"] = {"name": name, "sha256": fmt.sha256()}
        return cfg


@dataclass(frozen=True)
class Values:
    """A plain or multiple-choice record's column values: ``content`` (the question the prompt asks,
    with its options for multiple choice), ``choices`` (the option texts, or None)."""

    question: str
    target: str | None
    difficulty: int | None
    family: str | None
    key: str
    content: str
    choices: list[str] | None = None


@dataclass
class Outcome:
    """What stage 4 made of one record: its values (plain, multiple choice), a row (verl's layout), a
    refusal, or an issue (fatal for the import)."""

    values: Values | None = None
    row: dict[str, Any] | None = None
    refusal: Refusal | None = None
    issue: Issue | None = None
    hidden: bool = False


def _target(opts: ImportOptions, rec: Raw, key: str, field_name: str | None,
            got: tuple[str | None, str | None, str | None]) -> tuple[str | None, Outcome | None]:
    """(the record's target, or None; an early outcome: a refused target, or none where labeled=True)
    from ``got``, :func:`normalise_target`'s ``(target, why missing, refusal)``."""
    target, why, refused = got
    if refused:
        return None, Outcome(refusal=Refusal(rec.where, field_name or "<answer>", refused, key))
    if target is None and opts.labeled is True:
        return None, Outcome(issue=Issue(
            rec.pos, key, field_name or "<answer>",
            f"no answer ({why}) but labeled=True; use labeled='auto' to import such rows as unlabeled{_at(rec)}"))
    return target, None


def build_record(rec: Raw, fm: FieldMap, opts: ImportOptions, keys: KeyBuilder) -> Outcome:
    """Stage 4 for a plain or multiple-choice record: its column values."""
    q = rec.data.get(fm.question)
    if _missing(q) or not isinstance(q, str):
        return Outcome(issue=Issue(rec.pos, None, fm.question,
                                   f"expected a non-empty question str, found {type(q).__name__} {q!r:.60}{_at(rec)}"))
    question = q.strip()
    key, issue = keys.key(rec, question)
    if issue is not None:
        return Outcome(issue=issue)
    try:
        difficulty = _difficulty(rec.data.get(fm.difficulty)) if fm.difficulty else None
    except ValueError as exc:
        return Outcome(issue=Issue(rec.pos, key, fm.difficulty or "", f"{exc}{_at(rec)}"))
    family = _family(rec.data.get(fm.family)) if fm.family else None
    texts = None
    if fm.choices:
        got = choice_question(fm, rec, question)
        if isinstance(got, str):
            return Outcome(refusal=Refusal(rec.where, fm.options or GPQA_CORRECT, got, key))
        content, texts, letter = got
        target, early = _target(opts, rec, key, fm.answer, (letter, None if letter is not None else "empty", None))
    else:
        content = question
        target, early = _target(opts, rec, key, fm.answer, normalise_target(rec.data.get(fm.answer), fm.answer)
                                if fm.answer else (None, "no answer column", None))
    if early is not None:
        return early
    return Outcome(values=Values(question, target, difficulty, family, key, content, texts))


_VERL_TAKEN = set(EXTRA_INFO_REQUIRED) | {"question"}


@dataclass(frozen=True)
class VerlPlan:
    """How a verl Parquet file's ``extra_info`` maps to ours, decided once from its schema so that
    every batch carries the same keys with the same types: ``keys`` (kept), ``renamed`` (standard
    keys of another type, kept as ``verl_<key>``), ``style`` (some reward style is not ``rule``)."""

    keys: tuple[str, ...]
    renamed: frozenset[str]
    style: bool
    schema: Any  # the records schema the version is written with

    @classmethod
    def of(cls, path: Path) -> "VerlPlan | None":
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        from ..schema import records_schema

        if path.suffix.lower() not in (".parquet", ".pq"):
            return None
        try:
            file_schema = pq.read_schema(path)
            style = False
            if "reward_model" in file_schema.names and "style" in [f.name for f in file_schema.field("reward_model").type]:
                col = pq.read_table(path, columns=["reward_model"])["reward_model"]
                styles = pc.struct_field(col, "style")
                style = bool(pc.any(pc.not_equal(styles, "rule")).as_py())
        except (pa.ArrowException, OSError) as exc:
            raise RecordError(f"cannot read {path} as parquet: {exc}") from exc
        if EXTRA_INFO not in file_schema.names or not pa.types.is_struct(file_schema.field(EXTRA_INFO).type):
            return cls((), frozenset(), style, None)
        fields = [f for f in file_schema.field(EXTRA_INFO).type if f.name not in _VERL_TAKEN]
        renamed = frozenset(f.name for f in fields if f.name in EXTRA_INFO_OPTIONAL and not pa.types.is_null(f.type)
                            and not f.type.equals(_pa_scalar_type(EXTRA_INFO_OPTIONAL[f.name])))
        extras = {(f"verl_{f.name}" if f.name in renamed else f.name): f.type for f in fields
                  if f.name not in EXTRA_INFO_OPTIONAL or f.name in renamed}
        if style:
            extras["verl_reward_style"] = pa.string()
        return cls(tuple(f.name for f in fields), renamed, style, records_schema(extras))


def build_verl_record(rec: Raw, opts: ImportOptions, keys: KeyBuilder, plan: VerlPlan | None = None) -> Outcome:
    """Stage 4 for a row in verl's layout: the prompt as it is, ``reward_model.ground_truth`` as the
    target, ``extra_info.index`` (int or str) as the id; other ``extra_info`` keys kept as metadata."""
    d = rec.data
    prompt = d.get("prompt")
    if not isinstance(prompt, list) or not prompt or not all(isinstance(m, Mapping) for m in prompt):
        return Outcome(issue=Issue(rec.pos, None, "prompt", f"expected a list of chat messages, found {prompt!r:.60}"))
    messages = [{"role": m.get("role"), "content": m.get("content")} for m in prompt]
    users = [m["content"] for m in messages if m["role"] == "user" and isinstance(m["content"], str)]
    ei = d.get(EXTRA_INFO) if isinstance(d.get(EXTRA_INFO), Mapping) else {}
    question = ei.get("question") if isinstance(ei.get("question"), str) and ei.get("question").strip() else (users[-1] if users else None)
    if not question:
        return Outcome(issue=Issue(rec.pos, None, "prompt", "expected a user message with text, found none"))
    key, issue = keys.key(Raw(rec.pos, {"extra_info.index": ei.get("index")}, rec.line), question)
    if issue is not None:
        return Outcome(issue=issue)
    rm = d.get("reward_model") if isinstance(d.get("reward_model"), Mapping) else {}
    gt_field = "reward_model.ground_truth"
    target, early = _target(opts, rec, key, gt_field, normalise_target(rm.get("ground_truth"), gt_field))
    if early is not None:
        return early
    # the label state by the label mode, as columns.records_table sets it from a target column
    labeled = target is not None and opts.labeled is not False
    hidden = None if labeled else target  # (kept as the hidden answer, unless hidden_answers=False)
    sim = {"hidden_answer": hidden, "noise": "none"} if hidden is not None and opts.hidden_answers else None
    extra: dict[str, Any] = {"view": "original", "pair_key": None, "question": question.strip()}
    style = rm.get("style")
    if plan is not None:  # Parquet: the same keys in every row (None where a row has none)
        for k in plan.keys:
            extra[f"verl_{k}" if k in plan.renamed else k] = ei.get(k)
        if plan.style:
            extra["verl_reward_style"] = style if style != "rule" else None
    else:
        for k, v in ei.items():
            if k in _VERL_TAKEN or v is None:
                continue
            t = EXTRA_INFO_OPTIONAL.get(k)
            if t is not None and not (isinstance(v, t) and not isinstance(v, bool)):
                k = f"verl_{k}"  # a standard key with another type: kept under another name, not lost
            extra[k] = float(v) if isinstance(v, Decimal) else v
        if isinstance(style, str) and style != "rule":
            extra["verl_reward_style"] = style
    split = ei.get("split") if isinstance(ei.get("split"), str) and ei.get("split").strip() else opts.split
    ds = opts.data_source or (d.get("data_source") if isinstance(d.get("data_source"), str) and d.get("data_source").strip() else opts.source)
    ab = opts.ability or (d.get("ability") if isinstance(d.get("ability"), str) and d.get("ability").strip() else "math")
    row = make_row(data_source=ds, index=key, source=opts.source, prompt=messages, labeled=labeled,
                   ground_truth=target if labeled else "", split=split, ability=ab, extra=extra, simulation=sim,
                   validate=False)
    return Outcome(row=row, hidden=sim is not None)
