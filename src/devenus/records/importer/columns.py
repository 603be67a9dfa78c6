"""Stage 4 for a whole chunk pyarrow read: its column values computed column-wise, with exactly the
values :func:`~.build.build_record` gives each record (or None where a record needs it), and the one
builder of an import's records table from column values, :func:`records_table`."""

from __future__ import annotations

import hashlib
from typing import Any

from ..column_rules import _is_str
from ..schema import EXTRA_INFO, PY_WHITESPACE
from .build import ImportOptions
from .chunks import Chunk
from .fields import FieldMap
from .normalise import (
    MAX_ANSWER_FIELD_CHARS,
    Deduper,
    KeyBuilder,
    _difficulty,
    _family,
    _max_answer_chars,
    normalise_target,
    question_hash,
)

def _never_text(t: Any) -> bool:
    """Whether no value of the pyarrow type ``t`` is a str in Python's reading of the record, from any
    source (not a timestamp: pyarrow infers one from a date in JSON, where Python reads the string;
    not a dictionary: a category's values may be strings)."""
    import pyarrow as pa

    return (pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
            or pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_list(t)
            or pa.types.is_large_list(t) or pa.types.is_struct(t))


def _column(table: Any, name: str | None, ok) -> Any:
    """A column as one pyarrow array where its type passes ``ok``; None where the chunk lacks it or
    it holds only nulls; False where its type does not pass."""
    import pyarrow as pa

    if name is None or name not in table.column_names:
        return None
    col = table.column(name)
    if pa.types.is_null(col.type):
        return None
    return col.combine_chunks() if ok(col.type) else False


def _per_value(values: Any, f, type_: Any) -> Any:
    """``f`` of every value of a pyarrow array as an array of ``type_``: ``f`` runs once per distinct
    value (a column of levels or subjects holds a few) and pyarrow spreads the results; a null
    stays null (``f(None)`` is None for every ``f`` given here)."""
    import pyarrow as pa

    enc = values.dictionary_encode()
    return pa.array([f(v) for v in enc.dictionary.to_pylist()], type_).take(enc.indices)


def _scatter(n: int, parts: list[tuple[Any, Any]]) -> Any:
    """One array of ``n`` values from parts ``(row numbers, values)`` that together cover every row once."""
    import numpy as np
    import pyarrow as pa

    if len(parts) == 1:
        return parts[0][1]  # (its row numbers are 0..n-1 in order)
    where = np.empty(n, dtype=np.int64)
    start = 0
    for rows, values in parts:
        where[rows] = np.arange(start, start + len(values))
        start += len(values)
    return pa.concat_arrays([values for _, values in parts]).take(pa.array(where))


def _question_hashes(qs: Any) -> list[str]:
    """:func:`question_hash` of every (stripped) question of a string array: a question of printable
    ASCII without a double space is its own normal form (pyarrow finds them column-wise) and is
    hashed from the array's own bytes; the others are normalised one by one."""
    import numpy as np
    import pyarrow.compute as pc

    offsets = np.frombuffer(qs.buffers()[1], dtype=np.int32)[qs.offset:qs.offset + len(qs) + 1]
    data = memoryview(qs.buffers()[2] or b"")
    text = np.frombuffer(data, dtype=np.uint8)[offsets[0]:offsets[-1]]  # every value's bytes, in a row
    space = text == 0x20
    if text.size and (text.min() < 0x20 or text.max() > 0x7E or (space[1:] & space[:-1]).any()):
        # some question is not printable ASCII or has a double space somewhere: find which, row by
        # row (ascii_is_printable: 0x20-0x7e, as str.isprintable() on ASCII; RE2 finds "  " several
        # times faster than match_substring)
        odd = pc.indices_nonzero(pc.or_(pc.invert(pc.and_(pc.string_is_ascii(qs), pc.ascii_is_printable(qs))),
                                        pc.match_substring_regex(qs, "  "))).to_pylist()
    else:
        odd = []  # (the values are stripped: no pair of spaces straddles two of them)
    offsets = offsets.tolist()
    sha1 = hashlib.sha1
    out = [sha1(data[a:b]).hexdigest()[:16] for a, b in zip(offsets, offsets[1:])]
    for i in odd:
        out[i] = question_hash(qs[i].as_py())
    return out


def _column_targets(col: Any, field: str) -> Any:
    """:func:`normalise_target` of every value of a text column, as a string array (null: no
    target), or None where one is refused. Column-wise for the common answer ``"... #### 42"`` whose
    tail is ASCII without braces or a backslash (there :func:`_reduce_text` and :func:`unmatchable`
    reduce to a length check, a comma pattern and a non-finite pattern, run by pyarrow's RE2: no
    backtracking); every other value goes through :func:`normalise_target` itself. Lengths are
    checked before anything searches a value (in bytes first: a text has at least as many bytes as
    characters, so characters are counted only past the limit in bytes)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    def longer(arr: Any, limit: int) -> bool:
        return (pc.max(pc.binary_length(arr)).as_py() or 0) > limit and (pc.max(pc.utf8_length(arr)).as_py() or 0) > limit

    col = pc.cast(col, pa.string())
    if longer(col, MAX_ANSWER_FIELD_CHARS):
        return None  # (the per-record route names it, before any search)
    n = len(col)
    marked = pc.fill_null(pc.match_substring_regex(col, "####"), False)  # (RE2: far faster than match_substring)
    idx = pc.indices_nonzero(marked)
    simple = np.zeros(n, dtype=bool)
    parts = []
    if len(idx):
        texts = col if len(idx) == n else col.take(idx)
        tails = pc.utf8_trim(pc.list_element(pc.split_pattern(texts, "####", max_splits=1, reverse=True), 1),
                             characters=PY_WHITESPACE)
        if longer(tails, _max_answer_chars()):
            return None  # a target longer than the verifier extracts: refused
        plain = pc.and_(pc.string_is_ascii(tails), pc.invert(pc.match_substring_regex(tails, r"[{}\\]")))
        if pc.any(pc.and_(plain, pc.match_substring_regex(tails, r"^[-+]?(?:inf|infinity|nan)$", ignore_case=True))).as_py():
            return None  # a non-finite number: refused
        commas = pc.match_substring_regex(tails, r"^[-+]?[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?$")
        tails = pc.filter(pc.if_else(commas, pc.replace_substring(tails, ",", ""), tails), plain)
        rows = idx.to_numpy()[plain.to_numpy(zero_copy_only=False)]
        simple[rows] = True
        # (nothing after '####': no target)
        parts.append((rows, pc.if_else(pc.equal(pc.binary_length(tails), 0), pa.scalar(None, pa.string()), tails)))
    rest = np.flatnonzero(~simple)  # (only these are read into Python)
    if rest.size:
        targets = []
        for v in col.take(pa.array(rest)).to_pylist():
            target, _, refused = normalise_target(v, field)
            if refused:
                return None  # (the per-record route names it)
            targets.append(target)
        parts.append((rest, pa.array(targets, pa.string())))
    return _scatter(n, parts)


def fast_rows(chunk: Chunk, fm: FieldMap, opts: ImportOptions, keys: KeyBuilder,
              dedupe: Deduper | None = None) -> tuple[Any, int, Any] | None:
    """Stage 4 for a whole chunk at once, from pyarrow's table: ``(records table, hidden answers,
    each row's record number)`` with exactly the values :func:`~.build.build_record` gives, or None
    (nothing changed) where any record needs more than the plain route: an error, a refusal, a type
    Python would read otherwise (a float: Python keeps it as a Decimal), multiple choice, verl's
    layout. The caller then builds the chunk's records one by one; so every check is the
    per-record one, and this is only faster. Every step is a pyarrow operation over the chunk's
    columns but one SHA-1 per question key (and, with ``dedupe``, one digest per record)."""
    import pyarrow as pa

    if chunk.table is None or fm.choices or fm.from_verl:
        return None
    got = _plain_columns(chunk.table, fm, opts, keys)
    if got is None:
        return None
    cols, id_list = got
    n = chunk.table.num_rows
    keep, cols["key"] = _keys_in_order(chunk, cols, id_list, keys, dedupe)
    if len(keep) < n:
        rows = pa.array(keep, pa.int64())
        cols.update({k: cols[k].take(rows) for k in ("target", "difficulty", "family", "question")})
    out, hidden = records_table(opts, cols)
    return out, hidden, range(chunk.pos, chunk.pos + n) if len(keep) == n else [chunk.pos + i for i in keep]


def _input_columns(table: Any, fm: FieldMap) -> tuple[Any, ...] | None:
    """The question, answer, id, difficulty and family columns where their types are ones the column
    route reads as Python does (None where one is not)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    qcol = table.column(fm.question) if fm.question in table.column_names else None
    if qcol is None or not _is_str(qcol.type) or qcol.null_count:
        return None
    text_or_int = lambda t: _is_str(t) or pa.types.is_integer(t)  # noqa: E731
    answers = _column(table, fm.answer, text_or_int)
    ids = _column(table, fm.id, text_or_int)
    diffs = _column(table, fm.difficulty, text_or_int)
    category = lambda t: pa.types.is_dictionary(t) and _is_str(t.value_type)  # noqa: E731
    fams = _column(table, fm.family, lambda t: _is_str(t) or category(t) or _never_text(t))
    if answers is False or ids is False or diffs is False or fams is False:
        return None  # (a family pyarrow typed that Python may read as text: a date in JSON)
    if fm.id is not None and ids is None:
        return None  # an id column without a value in this chunk: the per-record route names every row
    if fams is not None and category(fams.type):
        fams = pc.cast(fams, pa.string())  # (a category column: Python reads each value's text)
    return qcol, answers, ids, diffs, fams


def _plain_columns(table: Any, fm: FieldMap, opts: ImportOptions, keys: KeyBuilder) -> tuple[dict, Any] | None:
    """``({question, target, difficulty, family, hashes}, ids)`` of a chunk whose every record is a plain
    row, each column as the per-record route computes it (str.strip() is utf8_trim of the very
    characters str.isspace() names; a value no column operation reproduces exactly goes through the
    per-record function); None where some record is not."""
    import pyarrow as pa
    import pyarrow.compute as pc

    got = _input_columns(table, fm)
    if got is None:
        return None
    qcol, answers, ids, diffs, fams = got
    n, string = table.num_rows, pa.string()
    qs = pc.cast(pc.utf8_trim(qcol.combine_chunks(), characters=PY_WHITESPACE), string)
    if (pc.min(pc.binary_length(qs)).as_py() or 0) == 0:
        return None  # an empty question: the per-record route names it
    if answers is None:
        targets = pa.nulls(n, string)
    elif _is_str(answers.type):
        targets = _column_targets(answers, fm.answer)
        if targets is None:
            return None  # a refused answer
    else:  # an integer's target is its decimal text (canonical_number), never refused
        targets = pc.cast(answers, string)
    if opts.labeled is True and targets.null_count:
        return None
    try:
        difficulty = _per_value(diffs, _difficulty, pa.int64()) if diffs is not None else pa.nulls(n, pa.int64())
    except ValueError:
        return None
    # (a family whose values are never text is None in every row)
    family = _per_value(fams, _family, string) if fams is not None and _is_str(fams.type) else pa.nulls(n, string)
    id_list = None
    if ids is not None:
        id_list = _id_list(ids, n, keys)
        if id_list is None:
            return None
    hashes = _question_hashes(qs) if ids is None else None
    return {"question": qs, "target": targets, "difficulty": difficulty, "family": family, "hashes": hashes}, id_list


def _id_list(ids: Any, n: int, keys: KeyBuilder) -> list[str] | None:
    """:func:`~.normalise._id_str` column-wise (a text trimmed, an integer as its decimal text), or None
    where an id is missing or repeats (the per-record route names it)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ids = pc.utf8_trim(pc.cast(ids, pa.string()), characters=PY_WHITESPACE) if _is_str(ids.type) \
        else pc.cast(ids, pa.string())
    if ids.null_count or (pc.min(pc.binary_length(ids)).as_py() or 0) == 0 or pc.count_distinct(ids).as_py() < n:
        return None
    id_list = ids.to_pylist()
    return id_list if keys.seen_ids.keys().isdisjoint(id_list) else None


def _keys_in_order(chunk: Chunk, cols: dict, id_list: list[str] | None, keys: KeyBuilder,
                   dedupe: Deduper | None) -> tuple[Any, Any]:
    """The records kept (``dedupe``: not exact repeats) and their keys, in file order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(cols["question"])
    keep: Any = range(n)
    if dedupe is not None:
        questions, tlist, line0 = cols["question"].to_pylist(), cols["target"].to_pylist(), chunk.line0
        keep = [i for i in range(n) if not dedupe.repeat(
            questions[i], tlist[i], f"line {line0 + i + 1}" if line0 is not None else f"row {chunk.pos + i}")]
    if id_list is not None:
        kept = id_list if len(keep) == n else [id_list[i] for i in keep]
        keys.seen_ids.update(zip(kept, (chunk.pos + i for i in keep)))
        return keep, pc.binary_join_element_wise(f"{keys.source}/", pa.array(kept, pa.string()), "")
    hashes = cols["hashes"]
    return keep, keys.hash_keys(hashes if len(keep) == n else [hashes[i] for i in keep])


def _prompts(fmt: Any, qs: Any, prompt_type: Any, choice: bool = False) -> Any:
    """The prompt column: as PromptFormat.messages, the format's fixed messages (system, worked turns),
    then each row's question in the template. Row i's contents are prefix[0..k-1] and users[i], taken
    from one array [*prefix, *users]."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    string, m = pa.string(), len(qs)
    template = fmt.template(choice)
    # template.replace("{question}", q) for every q: the template's pieces joined with the question
    # (PromptFormat.check: the template has the placeholder)
    pieces = template.split("{question}")
    users = pc.binary_join_element_wise(*[x for piece in pieces[:-1] for x in (piece, qs)], pieces[-1], "")
    prefix = fmt.prefix(template)
    k = len(prefix)
    step = k + 1
    if k:
        roles = pa.array([p["role"] for p in prefix] + ["user"], string).take(pa.array(np.tile(np.arange(step), m)))
        at = np.tile(np.arange(step, dtype=np.int64), m)
        at[k::step] = k + np.arange(m)
        contents = pa.concat_arrays([pa.array([p["content"] for p in prefix], string), users]).take(pa.array(at))
    else:  # (one message a row: the user texts as they are, not copied by a take)
        roles, contents = pa.repeat(pa.scalar("user", string), m), users
    messages = pa.StructArray.from_arrays([roles, contents], fields=list(prompt_type.value_type))
    return pa.ListArray.from_arrays(pa.array(np.arange(0, step * m + 1, step, dtype=np.int32)), messages,
                                    type=prompt_type)


def records_table(opts: ImportOptions, cols: dict, choice: bool = False) -> tuple[Any, int]:
    """The records table of an import's rows and its hidden answers, from column values, named as the
    fields of :class:`~.build.Values` (``question``: the stripped questions; ``target``: null where there
    is none; ``difficulty``, ``family``, ``key``; for multiple choice, ``choice=True`` with ``content``,
    the question with its options, and ``choices``, the option texts); the label state by the label mode."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..schema import records_schema

    string, targets, m = pa.string(), cols["target"], len(cols["question"])
    if opts.labeled is False:  # every row unlabeled; the answers kept as hidden ones (unless not)
        labeled = pa.array(np.zeros(m, dtype=bool))
        ground_truth = pa.repeat(pa.scalar("", string), m)
        hidden = targets if opts.hidden_answers else pa.nulls(m, string)
    else:  # labeled iff there is a target (labeled=True: every row has one, checked above)
        labeled = pc.is_valid(targets)
        ground_truth = pc.fill_null(targets, "")
        hidden = pa.nulls(m, string)

    schema = records_schema({"choices": pa.list_(string)} if choice else None)
    prompt = _prompts(opts.format[1], cols.get("content", cols["question"]), schema.field("prompt").type, choice)

    def const(v: Any) -> Any:
        return pa.repeat(pa.scalar(v, string), m)

    reward_model = pa.StructArray.from_arrays([const("rule"), ground_truth], fields=list(schema.field("reward_model").type))
    ei_type = schema.field(EXTRA_INFO).type
    ei_values = {
        "index": cols["key"], "labeled": labeled, "label_source": pc.if_else(labeled, "gold", "none"),
        "source": const(opts.source), "split": const(opts.split), "difficulty": cols["difficulty"],
        "family": cols["family"], "view": const("original"), "pair_key": const(None), "question": cols["question"],
        "choices": cols.get("choices"),
    }
    extra_info = pa.StructArray.from_arrays([ei_values[f.name] for f in ei_type], fields=list(ei_type))
    simulation = pa.StructArray.from_arrays([hidden, const("none")], fields=list(schema.field("simulation").type),
                                            mask=pc.is_null(hidden))
    out = pa.Table.from_arrays(
        [const(opts.data_source or opts.source), prompt, const(opts.ability or "math"), reward_model, extra_info,
         simulation], schema=schema)
    return out, m - hidden.null_count
