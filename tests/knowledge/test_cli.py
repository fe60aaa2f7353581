"""`hermes kb` through `main(argv)` on a real SQLite file: add (added, unchanged, updated per
file), list, search, rm; and `hermes kb eval` over the demo documents and labelled questions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from app.settings import PROJECT_ROOT


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HERMES_DB_PATH", str(tmp_path / "hermes.db"))
    docs = tmp_path / "docs"
    (docs / "zh").mkdir(parents=True)
    (docs / "hours.md").write_text(
        "---\ntitle: Opening hours\ntags: [hours]\nvalid_until: 2999-12-31\n---\n"
        "# Opening hours\n\n## Hotline\n\nThe hotline is open 9:00 to 21:00 every day.\n",
        encoding="utf-8",
    )
    (docs / "zh" / "points.txt").write_text("会员积分在获得后的第二年年底过期。", encoding="utf-8")
    (docs / "notes.docx").write_bytes(b"ignored: not a known type")
    return docs


def test_add_list_search_rm(folder: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["kb", "add", str(folder)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in out] == [["added", "hours.md"], ["added", "zh/points.txt"]]

    assert main(["kb", "add", str(folder)]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()] == [
        "unchanged", "unchanged",
    ]  # fmt: skip
    (folder / "hours.md").write_text(
        "# Opening hours\n\n## Hotline\n\nThe hotline is open 8:00 to 22:00 every day.\n",
        encoding="utf-8",
    )
    assert main(["kb", "add", str(folder / "hours.md")]) == 0
    assert capsys.readouterr().out.split()[:2] == ["updated", "hours.md"]

    assert main(["kb", "list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == 2 and any("v2" in line and "hours.md" in line for line in listed)

    assert main(["kb", "search", "when does the hotline open?"]) == 0
    found = capsys.readouterr().out
    assert "Opening hours › Hotline" in found and "8:00 to 22:00" in found
    assert main(["kb", "search", "积分什么时候过期", "--language", "zh"]) == 0
    assert "第二年年底" in capsys.readouterr().out

    document_id = next(line.split()[0] for line in listed if "hours.md" in line)
    assert main(["kb", "rm", document_id]) == 0
    capsys.readouterr()
    assert main(["kb", "search", "when does the hotline open?"]) == 0
    assert "nothing passes the threshold" in capsys.readouterr().out
    assert main(["kb", "rm", document_id]) == 1  # already gone: not found
    assert main(["kb", "list", "--tenant", "globex"]) == 0
    assert capsys.readouterr().out == ""


def test_a_file_that_cannot_be_read_is_named_and_the_rest_are_added(
    folder: Path, capsys: pytest.CaptureFixture[str]
):
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 this is no pdf")

    assert main(["kb", "add", str(folder)]) == 1
    captured = capsys.readouterr()
    assert "refused   broken.pdf" in captured.err
    assert captured.out.count("added") == 2


def test_kb_eval_reports_recall_and_unanswerable_per_language(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.setenv("HERMES_DB_PATH", str(tmp_path / "unused.db"))

    code = main(["kb", "eval", "--json"])

    report = json.loads(capsys.readouterr().out)
    assert code == (0 if report["met"] else 1)
    assert set(report["languages"]) == {"en", "zh"}
    for figures in report["languages"].values():
        assert figures["recall@1"] <= figures["recall@3"] <= figures["recall@5"]
        assert figures["unanswerable"] == 12
    # Where retrieval stands today (see the report of issue 27): a floor, so it can only rise.
    # The target (recall@3 >= 0.90 per language) is met in English, not yet in Chinese.
    assert report["languages"]["en"]["recall@3"] >= 0.90
    assert report["languages"]["zh"]["recall@3"] >= 0.85
    assert report["unanswerable_with_source_share"] <= 0.05


def test_kb_eval_asks_the_held_out_questions_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    # The held-out questions were never tuned on (docs/knowledge.md): a floor where they stood
    # on 2026-12-08, so a change that helps the tuned questions at their expense shows here.
    monkeypatch.setenv("HERMES_DB_PATH", str(tmp_path / "unused.db"))
    held_out = PROJECT_ROOT / "data" / "knowledge" / "eval" / "heldout.jsonl"

    main(["kb", "eval", "--json", "--file", str(held_out)])

    report = json.loads(capsys.readouterr().out)
    assert report["languages"]["en"]["answerable"] == 44
    assert report["languages"]["zh"]["answerable"] == 49
    assert report["languages"]["en"]["recall@3"] >= 0.66
    assert report["languages"]["zh"]["recall@3"] >= 0.84
    assert report["unanswerable_with_source_share"] <= 0.125
