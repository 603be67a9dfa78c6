"""Prompt formats (devenus.records.prompts): the registry, the format file (one error line naming the file and
the key), imports with each format, the manifest's record of it, and devenus.smollm2 phrasing rows by the
same registered format as ``devenus import --prompt-format smollm2-worked``."""

from __future__ import annotations

import json

import pytest

from devenus import smollm2
from devenus.records import DEFAULT_PROMPT_TEMPLATE, import_file, import_raw, validate_rows
from devenus.records.cli import main_import
from devenus.records.prompts import FORMATS, Example, PromptFormat, PromptFormatError, prompt_format
from devenus.records.versions import read_manifest

QS = [{"question": "What is 3 + 4?", "answer": "7"}, {"question": " Compute 12 - 5. ", "answer": "#### 7"}]
WORKED = "2 + 5 = 7. The final answer is \\boxed{7}."


def _yaml(tmp_path, text, name="fmt.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_plain_is_the_import_s_default_and_smollm2_worked_is_one_worked_turn():
    assert set(FORMATS) >= {"plain", "smollm2-worked"}
    assert import_raw(QS, source="p", prompt_format="plain") == import_raw(QS, source="p")
    assert FORMATS["plain"].messages("What is 3 + 4?") == [
        {"role": "user", "content": DEFAULT_PROMPT_TEMPLATE.replace("{question}", "What is 3 + 4?")}]
    assert FORMATS["smollm2-worked"].messages("What is 3 + 4?") == [
        {"role": "user", "content": "Compute 2 + 5. Put the final answer in \\boxed{}."},
        {"role": "assistant", "content": WORKED},
        {"role": "user", "content": "What is 3 + 4? Put the final answer in \\boxed{}."}]
    # the hash is the content's: the same texts give it, another text another
    assert FORMATS["plain"].sha256() == PromptFormat().sha256() != FORMATS["smollm2-worked"].sha256()
    assert FORMATS["smollm2-worked"].replace(system="Be brief.").sha256() != FORMATS["smollm2-worked"].sha256()


def test_an_unknown_name_lists_the_known_ones():
    with pytest.raises(PromptFormatError, match=r"unknown prompt format 'smollm3': give one of plain, smollm2-worked"):
        prompt_format("smollm3")


def test_a_format_file_is_read_by_its_keys_and_named_by_its_file(tmp_path):
    p = _yaml(tmp_path, "system: You are exact.\n"
                        "examples:\n  - {user: 'What is 1 + 1?', assistant: 'That is \\boxed{2}.'}\n"
                        "  - user: What is 2 + 2?\n    assistant: That is \\boxed{4}.\n"
                        "instruction: 'Q: {question}'\n")
    name, fmt = prompt_format(p)
    assert name == "fmt.yaml" and fmt.examples[1] == Example("What is 2 + 2?", "That is \\boxed{4}.")
    rows = import_raw(QS, source="f", prompt_format=str(p))
    assert [m["role"] for m in rows[1]["prompt"]] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert rows[1]["prompt"][1]["content"] == "Q: What is 1 + 1?"  # an example is phrased like the question
    assert rows[1]["prompt"][-1]["content"] == "Q: Compute 12 - 5."
    assert rows[1]["extra_info"]["question"] == "Compute 12 - 5."  # the question itself stays bare
    validate_rows(rows)
    # an empty file is the plain format; JSON works as YAML does
    assert prompt_format(_yaml(tmp_path, "", "empty.yml"))[1] == PromptFormat()
    assert prompt_format(_yaml(tmp_path, json.dumps({"instruction": "{question}!"}), "f.json"))[1].instruction == "{question}!"


@pytest.mark.parametrize("text, says", [
    ("examples:\n  - {user: a, assistant: 3}\n", r"examples\[0\]\.assistant must be a string, got 3"),
    ("examples:\n  - {user: a, asistant: b}\n",
     r"unknown key examples\[0\]\.asistant \(did you mean examples\[0\]\.assistant\?\)"),
    ("examples:\n  - {user: a}\n", r"examples\[0\]\.assistant is required"),
    ("examples:\n  - {user: a, assistant: b}\n  - just text\n", r"examples\[1\] must be a mapping of keys, got 'just text'"),
    ("examples: {user: a, assistant: b}\n", r"examples must be a list"),
    ("examples:\n  - {user: a, assistant: '  '}\n", r"examples\[0\]\.assistant must be a non-empty string"),
    ("instruction: Put the answer in a box.\n", r"instruction must contain the placeholder \{question\}"),
    ("system: ''\n", r"system must be a non-empty string or null"),
    ("sytem: Be brief.\n", r"unknown key sytem \(did you mean system\?\)"),
    ("instruction: [unclosed\n", r"not valid YAML/JSON"),
    ("- a list\n", r"expected a mapping of config keys, got list"),
])
def test_a_bad_format_file_is_one_line_naming_the_file_and_the_key(tmp_path, text, says):
    p = _yaml(tmp_path, text)
    with pytest.raises(PromptFormatError, match=says) as e:
        prompt_format(p)
    assert str(e.value).startswith(str(p)) and "\n" not in str(e.value)


def test_the_command_reports_a_bad_format_file_in_one_line_and_writes_nothing(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in QS))
    bad = _yaml(tmp_path, "examples:\n  - {user: a, assistant: 3}\n", "bad.yaml")
    assert main_import([str(src), "--out", str(tmp_path / "o.parquet"), "--prompt-format", str(bad), "--no-progress"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {bad}: examples[0].assistant must be a string") and "\n" not in err
    assert main_import([str(src), "--out", str(tmp_path / "o.parquet"), "--prompt-format", str(tmp_path / "none.yaml")]) == 1
    assert "none.yaml: no such config file" in capsys.readouterr().err
    assert not list(tmp_path.glob("o.*"))


@pytest.mark.parametrize("spec", ["plain", "smollm2-worked", "file"])
def test_the_command_writes_the_format_s_prompts_and_records_its_name_and_hash(tmp_path, capsys, spec):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in QS))
    if spec == "file":
        spec = str(_yaml(tmp_path, "system: Be exact.\nexamples:\n  - {user: '1 + 1?', assistant: '\\boxed{2}'}\n"))
    out = tmp_path / "o.parquet"
    assert main_import([str(src), "--out", str(out), "--prompt-format", spec, "--no-progress"]) == 0
    from devenus.records import read_records

    name, fmt = prompt_format(spec)
    assert f"keys from question hash; prompts by format {name!r} (sha256 {fmt.sha256()[:12]})\n" in capsys.readouterr().out
    rows = read_records(out)
    assert [r["prompt"] for r in rows] == [fmt.messages(q["question"].strip()) for q in QS]
    cfg = read_manifest(out).config
    assert cfg["prompt_format"] == {"name": name, "sha256": fmt.sha256()}


def test_system_prompt_and_template_replace_the_format_s_and_change_its_hash(tmp_path):
    rows = import_raw(QS[:1], source="o", prompt_format="smollm2-worked", system_prompt="Be brief.",
                      prompt_template="Q: {question}")
    assert rows[0]["prompt"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q: Compute 2 + 5."},
                                 {"role": "assistant", "content": WORKED}, {"role": "user", "content": "Q: What is 3 + 4?"}]
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(QS[0]) + "\n")
    _, a = import_file(src, tmp_path / "a.parquet", source="o", progress=False, prompt_format="smollm2-worked")
    _, b = import_file(src, tmp_path / "b.parquet", source="o", progress=False, prompt_format="smollm2-worked",
                       system_prompt="Be brief.")
    assert a.config["prompt_format"]["name"] == b.config["prompt_format"]["name"] == "smollm2-worked"
    assert a.config["prompt_format"]["sha256"] == FORMATS["smollm2-worked"].sha256() != b.config["prompt_format"]["sha256"]


def test_multiple_choice_keeps_its_letter_instruction_under_a_format_without_one(tmp_path):
    rec = [{"question": "Which is even?", "choices": ["3", "4"], "answer": 1}]
    fmt = PromptFormat(system="Be exact.", examples=(Example("Which is odd? A. 2 B. 3", "\\boxed{B}"),))
    msgs = import_raw(rec, source="mc", prompt_format=fmt)[0]["prompt"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[1]["content"].endswith("letter of the correct option within \\boxed{}.")
    assert msgs[-1]["content"].startswith("Which is even?") and "letter of the correct option" in msgs[-1]["content"]


def test_a_verl_file_s_prompt_is_never_reformatted(tmp_path):
    with pytest.raises(ValueError, match="--prompt-format, --prompt-template and --system-prompt do not apply"):
        import_raw(QS, source="v", from_verl=True, prompt_format="smollm2-worked")


def test_smollm2_chat_rows_are_the_import_with_smollm2_worked():
    pool = smollm2.chat_pool_rows(size=6)
    raw = [{"question": r["extra_info"]["question"], "answer": r["simulation"]["hidden_answer"]} for r in pool]
    imported = import_raw(raw, source="pool", labeled=False, prompt_format="smollm2-worked")
    assert [r["prompt"] for r in imported] == [r["prompt"] for r in pool]
    assert [r["extra_info"]["question"] for r in imported] == [r["extra_info"]["question"] for r in pool]
    assert [r["simulation"]["hidden_answer"] for r in imported] == [r["simulation"]["hidden_answer"] for r in pool]
    assert smollm2.chat_format() is FORMATS[smollm2.FORMAT_NAME]


def test_the_documented_format_file_loads_as_documented(tmp_path):
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "records.md").read_text()
    block = doc.split("### Prompt formats", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    fmt = prompt_format(_yaml(tmp_path, block, "my_format.yaml"))[1]
    assert fmt.messages("What is 3 + 4?") == [
        {"role": "system", "content": "You are a careful mathematician."},
        {"role": "user", "content": "What is 12 - 5? Put the final answer in \\boxed{}."},
        {"role": "assistant", "content": "12 - 5 = 7. The final answer is \\boxed{7}."},
        {"role": "user", "content": "What is 3 + 4? Put the final answer in \\boxed{}."}]
    err = doc.split("### Prompt formats", 1)[1].split("\nerror: ", 1)[1].split("\n", 1)[0]
    with pytest.raises(PromptFormatError) as e:
        prompt_format(_yaml(tmp_path, "examples:\n  - {user: a, assistant: 3}\n", "my_format.yaml"))
    assert str(e.value).replace(str(tmp_path) + "/", "") == err
