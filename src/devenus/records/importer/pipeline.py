"""The import: stages 2-4 over the chunks of a source, in one pass (two where the whole input's
columns give another field map than the first chunk's), and stage 5, the writer: one dataset version
(Parquet + manifest) from a file, or the rows in memory."""

from __future__ import annotations

import bisect
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..io import check_input
from ..schema import EXTRA_INFO
from ..validate import Issue, RecordError, find_table_issues, to_python, validate_rows
from ..versions import Refusal
from . import columns
from .build import ImportOptions, Values, VerlPlan, build_record, build_verl_record
from .chunks import BATCH_ROWS, Chunk, FileDigest, Raw
from .fields import GPQA_CORRECT, GPQA_INCORRECT, ColumnStats, FieldMap, _missing, detect_fields
from .normalise import Deduper, KeyBuilder, normalise_target
from .read import _row_chunks, iter_chunks

@dataclass(frozen=True)
class ImportSummary:
    """What an import detected and produced (``refusals``: rows left out, with why)."""

    input: str
    rows: int
    labeled: int
    unlabeled: int
    hidden_answers: int
    question_field: str
    answer_field: str | None
    id_field: str | None
    refusals: tuple[Refusal, ...] = ()
    choices: str | None = None
    from_verl: bool = False
    read: int = 0  # records read from the input
    dedupe: str | None = None
    duplicates: int = 0  # exact repeats left out (dedupe)
    conflicts: int = 0  # repeats of a prompt with another target, kept (dedupe)
    conflicts_listed: tuple[str, ...] = ()
    #: input columns no record field is made from (their values are not in the output), sorted
    not_imported: tuple[str, ...] = ()
    #: the prompt format given (its name and hash), "" when none was (the default, plain)
    prompt_format: str = ""

    def describe(self, max_refusals: int = 20) -> str:
        keys = f"id field {self.id_field!r}" if self.id_field else "question hash"
        text = (
            f"{self.rows} rows from {self.input}: {self.labeled} labeled, {self.unlabeled} unlabeled"
            f" ({self.hidden_answers} with a hidden answer); question field {self.question_field!r},"
            f" answer field {self.answer_field!r}, keys from {keys}"
        )
        if self.choices:
            text += f"; multiple choice ({self.choices}), targets are option letters"
        if self.prompt_format:
            text += f"; prompts by format {self.prompt_format}"
        if self.not_imported:
            names = ", ".join(repr(c) for c in self.not_imported[:20])
            more = f" and {len(self.not_imported) - 20} more" if len(self.not_imported) > 20 else ""
            text += (f"\nnot imported: {len(self.not_imported)} input column(s) no record field is made from: "
                     f"{names}{more} (their values are not in the output)")
        if self.dedupe:
            text += (f"\ndedupe {self.dedupe}: {self.read} records read, {self.duplicates} exact repeats collapsed,"
                     f" {self.conflicts} repeated prompt(s) with another target kept as rows of their own")
            text += "".join(f"\n  - {c}" for c in self.conflicts_listed)
            if self.conflicts > len(self.conflicts_listed):
                text += f"\n  ... and {self.conflicts - len(self.conflicts_listed)} more"
        if self.refusals:
            text += f"\nrefused {len(self.refusals)} row(s) whose target no answer can match:"
            text += "".join(f"\n  - {r}" for r in self.refusals[:max_refusals])
            if len(self.refusals) > max_refusals:
                text += f"\n  ... and {len(self.refusals) - max_refusals} more (all listed in the manifest)"
        return text


def _value_columns(values: list[Values]) -> dict[str, Any]:
    """:class:`~.build.Values` of records as the columns :func:`~.columns.records_table` takes (its fields,
    ``choices`` only for multiple choice)."""
    import pyarrow as pa

    types = {"difficulty": pa.int64(), "choices": pa.list_(pa.string())}
    names = [f for f in Values.__dataclass_fields__ if f != "choices" or values[0].choices is not None]
    return {f: pa.array([getattr(v, f) for v in values], types.get(f, pa.string())) for f in names}


class _Restart(Exception):
    """The whole input's field map differs from the one its first chunk gave: convert again with it."""

    def __init__(self, fields: FieldMap):
        super().__init__(fields)
        self.fields = fields


class _Pipeline:
    """Stages 2-4 over a source of chunks; yields row batches (row dicts, or a records table where
    :func:`fast_rows` built them) of at most ``batch_rows`` for stage 5."""

    def __init__(self, source: Any, opts: ImportOptions, batch_rows: int = BATCH_ROWS, progress=None,
                 fields: FieldMap | None = None):
        opts.check()
        self.opts = opts
        self.progress = progress
        self.batch_rows = batch_rows
        #: the input file's hash as its reader takes it (a file source)
        self.digest = FileDigest()
        if isinstance(source, (str, os.PathLike)):
            self.where = str(source)
            self.chunks = lambda: iter_chunks(source, batch_rows, digest=self.digest)
        else:
            self.where = "<rows>"
            self.chunks = lambda: _row_chunks(source)
        self.verl_plan = None
        #: the field map: given (a second pass, after the first found another), or detected as the
        #: input is read (see __iter__)
        self.fields = fields
        self.final = fields is not None
        if opts.from_verl:
            if isinstance(source, (str, os.PathLike)):
                self.verl_plan = VerlPlan.of(Path(source))
            self.fields = FieldMap("prompt", "reward_model.ground_truth", "extra_info.index", from_verl=True)
            self.final = True
        self.keys = KeyBuilder(opts.source, self.fields.id) if self.fields is not None else None
        self.dedupe = Deduper() if opts.dedupe == "exact" else None
        self.rows = self.labeled = self.hidden = self.seen = 0
        self.validate = True  # off when the version writer validates anyway
        self.as_rows = True  # False: a batch fast_rows built is yielded as its table
        self.refusals: list[Refusal] = []
        self.issues: list[Issue] = []
        #: every input column seen (an ordered set): the ones the field map does not read are named
        self.columns: dict[str, None] = {}

    def _repeat(self, rec: Raw) -> bool:
        """``dedupe``: whether ``rec`` repeats an earlier record's prompt and target exactly."""
        d, fm = rec.data, self.fields
        if fm.from_verl:
            prompt = d.get("prompt")
            rm = d.get("reward_model") if isinstance(d.get("reward_model"), Mapping) else {}
            ident = json.dumps(to_python(prompt), sort_keys=True, default=str, ensure_ascii=False)
            gt = rm.get("ground_truth")
            return self.dedupe.repeat(ident, None if gt is None else str(gt), rec.where)
        q = d.get(fm.question)
        if not isinstance(q, str) or not q.strip():
            return False  # (build_record reports it)
        if fm.choices:  # the options are part of the prompt; the answer as given
            opts = [d.get(c) for c in ((GPQA_CORRECT, *GPQA_INCORRECT) if fm.choices == "gpqa" else (fm.options,))]
            prompt = json.dumps([q.strip(), opts], sort_keys=True, default=str, ensure_ascii=False)
            raw = d.get(fm.answer) if fm.answer else None
            return self.dedupe.repeat(prompt, None if _missing(raw) else repr(raw), rec.where)
        target = normalise_target(d.get(fm.answer), fm.answer)[0] if fm.answer else None
        return self.dedupe.repeat(q.strip(), target, rec.where)

    def _convert(self, chunk: Chunk) -> tuple[Any, list[int]]:
        """One chunk's rows (a records table; row dicts for verl's layout) and each one's record number:
        column-wise where :func:`~.columns.fast_rows` settles the chunk, else record by record
        (:func:`~.build.build_record`'s values, built into the table by the same
        :func:`~.columns.records_table`)."""
        fast = columns.fast_rows(chunk, self.fields, self.opts, self.keys, self.dedupe)
        if fast is not None:
            table, hidden, pos = fast
            if not self.issues:
                self.hidden += hidden
            return table, pos
        out, pos = [], []
        for rec in chunk.raw():
            if self.dedupe is not None and self._repeat(rec):
                continue
            o = (build_verl_record(rec, self.opts, self.keys, self.verl_plan) if self.fields.from_verl
                 else build_record(rec, self.fields, self.opts, self.keys))
            if o.issue is not None:
                self.issues.append(o.issue)
            elif o.refusal is not None:
                self.refusals.append(o.refusal)
            elif not self.issues:  # once the import has failed, only errors are still collected
                out.append(o.row if o.row is not None else o.values)
                pos.append(rec.pos)
                self.hidden += o.hidden
        if self.fields.from_verl or not out or self.issues:
            return out, pos
        table, hidden = columns.records_table(self.opts, _value_columns(out), choice=bool(self.fields.choices))
        self.hidden += hidden
        return table, pos

    def _batch(self, parts: list) -> Any:
        """One batch for stage 5 from the parts of consecutive chunks (rows or records tables)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if all(not isinstance(p, list) for p in parts):
            out = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
            labeled = pc.sum(pc.struct_field(out.column(EXTRA_INFO), "labeled")).as_py() or 0
            n = out.num_rows
            if self.validate:  # (checked as the table it is, before it becomes rows)
                issues = find_table_issues(out)
                if issues:
                    raise RecordError(issues)
            if self.as_rows:
                out = out.to_pylist()
        else:
            out = [r for p in parts for r in (p if isinstance(p, list) else p.to_pylist())]
            if self.validate:
                validate_rows(out)
            labeled, n = sum(1 for r in out if r[EXTRA_INFO]["labeled"]), len(out)
        self.rows += n
        self.labeled += labeled
        return out

    def _detect(self, stats: ColumnStats) -> FieldMap:
        o = self.opts
        return detect_fields(stats, where=self.where, labeled=o.labeled, question_field=o.question_field,
                             answer_field=o.answer_field, id_field=o.id_field)

    def __iter__(self) -> Iterator[Any]:
        """One pass: stage 2 decides the fields from the first chunk and stages 3-4 convert as the input
        is read, while the column statistics of the whole input are gathered; if the whole input
        gives another field map (a column with values only later, say), :class:`_Restart` says so and
        the caller runs a second pass with it. Without a first chunk's map, nothing is converted."""
        stats = None if self.final else ColumnStats()
        undecided = False
        parts: list = []  # the batch being gathered (rows, or records tables), of record group `current`
        current = -1
        for chunk in self.chunks():
            # (pyarrow's columns where it read the block, else the records' keys: Python reads them anyway)
            for c in (chunk.table.column_names if chunk.table is not None else (k for r in chunk.raw() for k in r.data)):
                self.columns.setdefault(str(c), None)
            if stats is not None:
                if chunk.table is None or not stats.add_table(chunk.table):
                    for r in chunk.raw():
                        stats.add(r.data)
                if self.fields is None and not undecided:
                    try:
                        self.fields = self._detect(stats)
                        self.keys = KeyBuilder(self.opts.source, self.fields.id)
                    except RecordError:
                        undecided = True  # (the whole input decides, below)
            self.seen += chunk.rows
            if self.progress is not None:
                self.progress.update(chunk.rows)
            if self.fields is None or undecided:
                continue
            out, pos = self._convert(chunk)
            if self.issues or not pos:
                continue
            # batches of the records numbered [k * batch_rows, (k + 1) * batch_rows), whatever the
            # chunks: the Parquet's row groups are the same however the input was read
            start = 0
            while start < len(pos):
                group = pos[start] // self.batch_rows
                end = bisect.bisect_left(pos, (group + 1) * self.batch_rows, start)
                if parts and group != current:
                    yield self._batch(parts)
                    parts = []
                current = group
                parts.append(out[start:end] if end - start < len(pos) else out)
                start = end
        if parts and not self.issues:
            yield self._batch(parts)
        if stats is not None:
            if stats.rows == 0:
                raise RecordError(f"no records in {self.where}")
            fields = self._detect(stats)  # (raises what the whole input lacks)
            if fields != self.fields or undecided:
                raise _Restart(fields)
        if self.issues:
            raise RecordError(self.issues, header=f"cannot import {self.where}")
        if self.seen == 0:
            raise RecordError(f"no records in {self.where}")
        if self.rows == 0:
            raise RecordError(f"no row of {self.where} could be imported: all {len(self.refusals)} were refused"
                              + "".join(f"\n  - {r}" for r in self.refusals[:20]))

    def summary(self) -> ImportSummary:
        d = self.dedupe
        return ImportSummary(
            input=self.where, rows=self.rows, labeled=self.labeled, unlabeled=self.rows - self.labeled,
            hidden_answers=self.hidden, question_field=self.fields.question, answer_field=self.fields.answer,
            id_field=self.fields.id, refusals=tuple(self.refusals), choices=self.fields.choices,
            from_verl=self.fields.from_verl, read=self.seen, dedupe=self.opts.dedupe,
            duplicates=d.duplicates if d else 0, conflicts=d.conflicts if d else 0,
            conflicts_listed=tuple(d.listed) if d else (),
            not_imported=tuple(sorted(set(self.columns) - self.fields.reads())),
            prompt_format=self._format_said(),
        )

    def _format_said(self) -> str:
        if self.opts.prompt_format is None:
            return ""
        name, fmt = self.opts.format
        return f"{name!r} (sha256 {fmt.sha256()[:12]})"


def import_raw_with_summary(path_or_rows: Any, **options: Any) -> tuple[list[dict[str, Any]], ImportSummary]:
    """:func:`import_raw`, also returning an :class:`ImportSummary` (with the refused rows)."""
    opts, fields = ImportOptions(**options), None
    while True:
        pipe = _Pipeline(path_or_rows, opts, fields=fields)
        try:
            rows = [r for batch in pipe for r in batch]
        except _Restart as again:
            fields = again.fields
            continue
        return rows, pipe.summary()


def import_raw(path_or_rows: Any, **options: Any) -> list[dict[str, Any]]:
    """Convert raw question/answer data into validated records, in memory (see the module docstring).

    ``path_or_rows``: a ``.jsonl``/``.ndjson``, ``.json``, ``.csv``/``.tsv`` or ``.parquet`` path, a
    list of dicts or a DataFrame. Options (:class:`ImportOptions`): ``source`` (required; prefixes
    every key), ``data_source`` (default ``source``), ``split``, ``labeled`` (True/"auto"/False),
    ``question_field`` / ``answer_field`` / ``id_field`` (``""`` forces question-hash keys),
    ``ability``, ``system_prompt``, ``prompt_template`` (with ``{question}``; default
    :data:`DEFAULT_PROMPT_TEMPLATE`, or :data:`DEFAULT_CHOICE_TEMPLATE` for multiple choice),
    ``hidden_answers``, ``from_verl``. Raises :class:`RecordError` listing every bad row; rows whose
    target can never be matched are left out and listed in the summary
    (:func:`import_raw_with_summary`).
    """
    return import_raw_with_summary(path_or_rows, **options)[0]


def import_file(path: str | os.PathLike[str], out: str | os.PathLike[str], *, force: bool = False,
                batch_rows: int = BATCH_ROWS, progress: bool | None = None, **options: Any):
    """Import the raw file ``path`` as the dataset version ``out`` (Parquet + manifest), streaming.

    Memory is bounded by a batch (plus one small entry per row for keys); the manifest's parent is
    the raw file's hash, its rule ``import``, its config the options, its refusals the rows left out.
    Returns ``(ImportSummary, Manifest)``.
    """
    from ..versions import Parent, VersionWriter, check_output, sha256_file

    path = Path(path)
    check_output(out, [path], force=force)
    opts = ImportOptions(**options)
    bar = _progress(path, progress)
    fields = None
    try:
        while True:
            pipe = _Pipeline(path, opts, batch_rows, progress=bar, fields=fields)
            pipe.validate = False
            pipe.as_rows = False  # the writer checks a table column-wise, with the same result as its rows
            try:
                with VersionWriter(out, rule="import", config=opts.config(), force=force,
                                   parents=[Parent(path.name, "", None, check_input(path))],  # (hashed below)
                                   schema=pipe.verl_plan.schema if pipe.verl_plan is not None else None) as w:
                    for batch in pipe:
                        w.write(batch)
                    for r in pipe.refusals:
                        w.refuse(r)
                    summary = pipe.summary()
                    # the bytes the reader read, hashed as it read them (else read again for the hash)
                    sha = pipe.digest.sha.hexdigest() if pipe.digest.whole else sha256_file(path)
                    w.parents[0] = Parent(path.name, sha, pipe.seen)  # (rows: the raw records read)
            except _Restart as again:  # (the writer discarded its temporary files)
                fields = again.fields
                if bar is not None:
                    bar.reset()
                continue
            break
    finally:
        if bar is not None:
            bar.close()
    return summary, w.manifest


def _progress(path: Path, enabled: bool | None):
    """A tqdm bar over records for ``path`` (total known for Parquet); None when disabled."""
    if enabled is False:
        return None
    from tqdm import tqdm

    total = None
    if path.suffix.lower() in (".parquet", ".pq"):
        from ..versions import parquet_rows

        total = parquet_rows(path)
    return tqdm(total=total, desc=f"import {path.name}", unit=" rows", disable=None if enabled is None else not enabled,
                mininterval=0.5, leave=False)
