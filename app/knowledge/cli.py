"""`hermes kb …`: add, list, remove and search a tenant's documents in the configured
database, and `hermes kb eval` (the labelled questions against the demo documents in a
temporary database)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from app.errors import ConfigError, HermesError
from app.knowledge.evaluation import evaluate, load_questions
from app.knowledge.ingest import add_paths
from app.knowledge.service import KnowledgeBase
from app.principal import LOCAL
from app.settings import PROJECT_ROOT, Settings, load_settings
from app.storage.engine import open_database
from app.storage.sqlite import SqliteDatabase

QUESTIONS = PROJECT_ROOT / "data" / "knowledge" / "eval" / "questions.jsonl"

Work = Callable[[KnowledgeBase, Settings], Awaitable[int]]


def _run(work: Work) -> int:
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"hermes: {exc}", file=sys.stderr)
        return 2

    async def run() -> int:
        db = await open_database(settings)
        try:
            return await work(KnowledgeBase(db, settings.knowledge), settings)
        finally:
            await db.close()

    try:
        return asyncio.run(run())
    except HermesError as exc:
        print(f"hermes: {exc}", file=sys.stderr)
        return 1


def _add(args: argparse.Namespace) -> int:
    async def work(kb: KnowledgeBase, _: Settings) -> int:
        outcomes = await add_paths(kb, args.tenant, args.paths, trusted=args.trusted)
        failed = 0
        for outcome in outcomes:
            if outcome.added is not None:
                d = outcome.added.document
                print(f"{outcome.added.action:<9} {outcome.source}  {d.id} v{d.version}")
            else:
                failed += 1
                print(f"refused   {outcome.source}: {outcome.error}", file=sys.stderr)
        if not outcomes:
            print("hermes: no documents found (.md, .markdown, .html, .htm, .txt, .pdf)")
            return 1
        return 1 if failed else 0

    return _run(work)


def _list(args: argparse.Namespace) -> int:
    async def work(kb: KnowledgeBase, _: Settings) -> int:
        cursor = None
        while True:
            page = await kb.list_documents(args.tenant, cursor=cursor, limit=200)
            for d in page.items:
                print(f"{d.id}  v{d.version}  {d.language}  {d.chunk_count:>3} chunks  {d.source}")
            cursor = page.next_cursor
            if cursor is None:
                return 0

    return _run(work)


def _rm(args: argparse.Namespace) -> int:
    async def work(kb: KnowledgeBase, _: Settings) -> int:
        for document_id in args.ids:
            await kb.delete(args.tenant, document_id)
            print(f"removed {document_id}")
        return 0

    return _run(work)


def _search(args: argparse.Namespace) -> int:
    async def work(kb: KnowledgeBase, _: Settings) -> int:
        passages = await kb.search(
            args.tenant, args.query, language=args.language, limit=args.limit
        )
        if not passages:
            print("nothing passes the threshold")
        for p in passages:
            snippet = " ".join(p.text.split())[:120]
            print(f"{p.score:.2f}  {p.title} › {p.section}  [{p.document_id} {p.chunk_id}]")
            print(f"      {snippet}")
        return 0

    return _run(work)


def _eval(args: argparse.Namespace) -> int:
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"hermes: {exc}", file=sys.stderr)
        return 2
    folder = settings.knowledge.dir or PROJECT_ROOT / "data" / "knowledge"

    async def run(path: Path) -> dict[str, Any]:
        db = SqliteDatabase(path, migrations_dir=settings.storage.migrations_dir)
        await db.open()
        try:
            kb = KnowledgeBase(db, settings.knowledge)
            refused = [o for o in await add_paths(kb, LOCAL.tenant_id, [folder]) if o.error]
            if refused:
                raise HermesError(f"{refused[0].source}: {refused[0].error}")
            report = await evaluate(kb, LOCAL.tenant_id, load_questions(args.file))
            return {**report.as_dict(), "misses": report.misses}
        finally:
            await db.close()

    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(run(Path(tmp) / "kb-eval.db"))
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
    else:
        for lang, f in result["languages"].items():
            print(
                f"{lang}: {f['answerable']} answerable  recall@1 {f['recall@1']:.3f}"
                f"  recall@3 {f['recall@3']:.3f}  recall@5 {f['recall@5']:.3f}"
                f"  MRR {f['mrr']:.3f}  unanswerable given a source"
                f" {f['unanswerable_with_source']}/{f['unanswerable']}"
            )
        share = result["unanswerable_with_source_share"]
        print(f"unanswerable questions given a source: {share:.1%}")
        print("targets met" if result["met"] else "targets NOT met (recall@3 >= 0.90, <= 5 %)")
    return 0 if result["met"] else 1


def register(sub: Any) -> None:
    kb = sub.add_parser("kb", help="the knowledge base: add, list, rm, search, eval")
    commands = kb.add_subparsers(dest="kb_command", required=True)

    def command(name: str, help: str, func: Callable[[argparse.Namespace], int]) -> Any:
        parser = commands.add_parser(name, help=help)
        parser.set_defaults(func=func)
        if name != "eval":
            parser.add_argument("--tenant", default=LOCAL.tenant_id, help="default: default")
        return parser

    add = command(
        "add", "add files or folders (.md .html .txt .pdf); a changed file is a new version", _add
    )
    add.add_argument("paths", nargs="+", type=Path)
    add.add_argument("--trusted", action="store_true", help="an admin vouches for the content")
    command("list", "the tenant's documents", _list)
    rm = command("rm", "remove documents (gone from search at once)", _rm)
    rm.add_argument("ids", nargs="+")
    search = command("search", "what a turn would be given for a question", _search)
    search.add_argument("query")
    search.add_argument("--language", choices=["zh", "en"])
    search.add_argument("--limit", type=int)
    evaluation = command("eval", "recall@1/3/5 and MRR on the labelled questions", _eval)
    evaluation.add_argument("--file", type=Path, default=QUESTIONS)
    evaluation.add_argument("--json", action="store_true")
