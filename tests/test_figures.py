"""Every picture in README.md and docs/ names the committed results file it is drawn from: the paragraph that
holds the image link, or the one just before or after it (its caption), names a file under bench/results/ or
experiments/results/ that exists and git tracks; a bench result carries its date, code version and machine
(bench/_results.py write_result)."""

import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PICTURE = r"[^)\s]+\.(?:png|svg|jpe?g|gif)"
LINKS = (re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)"), re.compile(rf"\[[^\]]*\]\(({PICTURE})\)"),
         re.compile(r"<img\s[^>]*src=\"([^\"]+)\""))
SOURCE = re.compile(r"(?:bench|experiments)/results/[\w./-]*\w")


def pages(root: Path = ROOT) -> list[Path]:
    return [p for p in [root / "README.md", *sorted((root / "docs").rglob("*.md"))] if p.is_file()]


def pictures(text: str) -> list[tuple[str, str]]:
    """(image link, its caption: the paragraph holding it and the paragraphs on either side)."""
    blocks = re.split(r"\n\s*\n", text)
    out = []
    for i, block in enumerate(blocks):
        links = {m.group(1) for rx in LINKS for m in rx.finditer(block)}
        caption = "\n\n".join(blocks[max(0, i - 1):i + 2])
        out += [(link, caption) for link in sorted(links) if not link.startswith(("http://", "https://"))]
    return out


def tracked(root: Path) -> set[str] | None:
    """The files git tracks (None outside a checkout, e.g. an unpacked sdist)."""
    r = subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True, text=True, timeout=60)
    return set(r.stdout.splitlines()) if r.returncode == 0 else None


def source_problem(path: str, root: Path, files: set[str] | None) -> str | None:
    """Why ``path`` is not a results file a picture can come from (None: it is one)."""
    f = root / path
    if f.suffix in (".png", ".svg", ".jpg", ".jpeg", ".gif") or not f.is_file():
        return "not a results file here"
    if files is not None and path not in files:
        return "not tracked by git"
    if path.startswith("bench/results/"):
        doc = json.loads(f.read_text())
        missing = [k for k in ("date", "code", "machine") if not doc.get(k)]
        if missing or not doc["code"].get("commit"):
            return f"no {', '.join(missing) or 'code.commit'} (write it with bench/_results.py write_result)"
    return None


def problems(root: Path = ROOT) -> list[str]:
    files = tracked(root)
    out = []
    for page in pages(root):
        for link, caption in pictures(page.read_text()):
            where = f"{page.relative_to(root)}: {link}"
            if not (page.parent / link).is_file():
                out.append(f"{where}: the picture is not there")
            named = sorted(set(SOURCE.findall(caption)))
            why = {s: source_problem(s, root, files) for s in named}
            if not any(w is None for w in why.values()):
                out.append(f"{where}: its caption names no committed results file"
                           + (f" ({'; '.join(f'{s}: {w}' for s, w in why.items())})" if why else ""))
    return out


def test_every_picture_names_its_results_file():
    assert len(pages()) > 1
    found = problems()
    assert not found, "\n".join(found)


def test_a_picture_without_its_source_is_found(tmp_path):
    (tmp_path / "docs" / "pics").mkdir(parents=True)
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "docs" / "pics" / "a.png").write_bytes(b"png")
    good = {"date": "2026-12-05T00:00:00Z", "code": {"commit": "abc"}, "machine": {"cores": 2}}
    (tmp_path / "bench" / "results" / "good.json").write_text(json.dumps(good))
    (tmp_path / "bench" / "results" / "bare.json").write_text(json.dumps({"result": {}}))
    page = tmp_path / "docs" / "page.md"

    page.write_text("Intro.\n\nFrom `bench/results/good.json`.\n![a](pics/a.png)\n\nAfter.\n")
    assert problems(tmp_path) == []  # (no git here: existence and provenance are checked)
    page.write_text("From `bench/results/good.json`.\n\nFar away.\n\nStill further.\n\n![a](pics/a.png)\n")
    assert problems(tmp_path) == ["docs/page.md: pics/a.png: its caption names no committed results file"]
    page.write_text("[the picture](pics/a.png) from bench/results/bare.json and experiments/results/none.json.\n")
    assert problems(tmp_path) == [
        "docs/page.md: pics/a.png: its caption names no committed results file (bench/results/bare.json: no date, "
        "code, machine (write it with bench/_results.py write_result); experiments/results/none.json: not a "
        "results file here)"]
    page.write_text("![b](pics/b.png) from `bench/results/good.json`.\n")
    assert problems(tmp_path) == ["docs/page.md: pics/b.png: the picture is not there"]
    (tmp_path / "README.md").write_text("<img src=\"docs/pics/a.png\">\n")
    assert problems(tmp_path)[0] == "README.md: docs/pics/a.png: its caption names no committed results file"
