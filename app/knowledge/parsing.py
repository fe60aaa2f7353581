"""Knowledge documents as text: Markdown, HTML, plain text or PDF read into blocks, each with
the heading path it sits under.

A block is a paragraph, a whole list or a whole table: the chunker never splits a list or a
table, so they are kept apart here. Nothing is guessed: a plain-text line that looks like a
heading stays text, and a PDF has no headings (its pages are paragraphs). A document that
cannot be read is an `InvalidDocument` naming the problem, never text made up of mojibake.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any, Literal, get_args

import yaml

from app.errors import InvalidDocument

Format = Literal["markdown", "html", "text", "pdf"]
FORMATS: tuple[str, ...] = get_args(Format)


@dataclass(frozen=True)
class Block:
    section: tuple[str, ...]  # heading path, e.g. ("Returns", "Shipping costs")
    kind: Literal["paragraph", "list", "table"]
    text: str


@dataclass(frozen=True)
class ParsedDocument:
    title: str | None  # first top-level heading or <title>, if any
    blocks: list[Block]


def parse(content: bytes, format: Format) -> ParsedDocument:
    """`content` read as `format`; raises `InvalidDocument` when it cannot be, or holds no
    text at all (nothing would be found by searching it)."""
    if format == "pdf":
        document = _parse_pdf(content)
    elif format == "markdown":
        document = _parse_markdown(split_front_matter(decode(content))[1])
    elif format == "html":
        document = _parse_html(decode(content))
    elif format == "text":
        document = ParsedDocument(
            None, [Block((), "paragraph", p) for p in _paragraphs(decode(content))]
        )
    else:
        raise InvalidDocument(f"unknown format {format!r}: use one of {', '.join(FORMATS)}")
    if not document.blocks:
        raise InvalidDocument(f"the {format} document has no text")
    return document


def decode(content: bytes) -> str:
    """UTF-8 text with its newlines made `\\n`; a byte-order mark is dropped."""
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidDocument(
            f"the document is not UTF-8 text: byte 0x{content[exc.start]:02x} at offset {exc.start}"
        ) from None
    if "\x00" in text:
        raise InvalidDocument("the document has NUL bytes: it looks like a binary file")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """A Markdown file's YAML front matter (`---` ... `---` at its very start) and the rest.
    No front matter is an empty mapping; front matter that is not a YAML mapping is an error."""
    if not text.startswith("---\n"):
        return {}, text
    end = re.search(r"^(?:---|\.\.\.)[ \t]*$", text[4:], re.MULTILINE)
    if end is None:
        return {}, text
    try:
        meta = yaml.safe_load(text[4 : 4 + end.start()])
    except yaml.YAMLError as exc:
        raise InvalidDocument(f"the front matter is not valid YAML: {exc}") from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise InvalidDocument("the front matter must be a YAML mapping (key: value lines)")
    return meta, text[4 + end.end() :].lstrip("\n")


# -- shared text helpers ------------------------------------------------------------------------

_CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uf900-\ufaff\uff00-\uffef]")


def join_lines(lines: list[str]) -> str:
    """Soft-wrapped lines as one: a space between words, none between Chinese characters."""
    out = ""
    for line in (part.strip() for part in lines):
        if not line:
            continue
        if out and not (_CJK.match(out[-1]) and _CJK.match(line[0])):
            out += " "
        out += line
    return out


def _paragraphs(text: str) -> Iterator[str]:
    for part in re.split(r"\n[ \t]*\n", text):
        joined = join_lines(part.split("\n"))
        if joined:
            yield joined


# -- Markdown -----------------------------------------------------------------------------------

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$|^ {0,3}(#{1,6})[ \t]*$")
_LIST_ITEM = re.compile(r"^ {0,3}(?:[-*+]|\d{1,9}[.)])[ \t]+\S")
_TABLE_ROW = re.compile(r"^ {0,3}\|")
_TABLE_RULE = re.compile(r"^ {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_INLINE = (
    (re.compile(r"<!--.*?-->", re.DOTALL), ""),
    (re.compile(r"!\[([^\]]*)\]\([^)]*\)"), r"\1"),  # an image: its alt text
    (re.compile(r"\[([^\]]+)\]\(([^)\s]+)[^)]*\)"), r"\1 (\2)"),  # a link keeps its address
    (re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1"), r"\2"),
    (re.compile(r"(?<![\w*])\*(?=\S)([^*]+?)(?<=\S)\*(?![\w*])"), r"\1"),
    (re.compile(r"`([^`]+)`"), r"\1"),
)


def _inline(text: str) -> str:
    for pattern, replacement in _INLINE:
        text = pattern.sub(replacement, text)
    return text


class _MarkdownReader:
    def __init__(self) -> None:
        self.title: str | None = None
        self.blocks: list[Block] = []
        self.path: list[tuple[int, str]] = []  # (level, heading) of the headings open
        self.pending: list[str] = []  # the lines of the block being read
        self.kind: Literal["paragraph", "list", "table"] = "paragraph"

    @property
    def section(self) -> tuple[str, ...]:
        return tuple(heading for _, heading in self.path)

    def flush(self) -> None:
        if self.kind == "paragraph":
            text = join_lines([_inline(line) for line in self.pending])
        else:
            text = "\n".join(_inline(line.rstrip()) for line in self.pending if line.strip())
        if text.strip():
            self.blocks.append(Block(self.section, self.kind, text.strip("\n")))
        self.pending = []
        self.kind = "paragraph"

    def heading(self, level: int, text: str) -> None:
        self.flush()
        text = _inline(text).strip()
        while self.path and self.path[-1][0] >= level:
            self.path.pop()
        if text:
            self.path.append((level, text))
        if level == 1 and self.title is None and text:
            self.title = text

    def start(self, kind: Literal["paragraph", "list", "table"], line: str) -> None:
        if self.pending and self.kind != kind:
            self.flush()
        self.kind = kind
        self.pending.append(line)


def _parse_markdown(text: str) -> ParsedDocument:
    reader = _MarkdownReader()
    lines = text.split("\n")
    fence: str | None = None
    blank_before = True
    for line in lines:
        if fence is not None:  # inside a code block: nothing is markup
            if line.strip().startswith(fence):
                fence = None
            else:
                reader.pending.append(line)
            continue
        opened = _FENCE.match(line)
        if opened:
            reader.flush()
            fence = opened.group(1)
            continue
        if not line.strip():
            if reader.kind == "paragraph" or reader.kind == "table":
                reader.flush()
            blank_before = True
            continue
        heading = _HEADING.match(line)
        setext = _SETEXT.match(line)
        if heading:
            level = heading.group(1) or heading.group(3)
            reader.heading(len(level), heading.group(2) or "")
        elif (
            setext and reader.kind == "paragraph" and len(reader.pending) == 1 and not blank_before
        ):
            text_line = reader.pending.pop()
            reader.heading(1 if setext.group(1)[0] == "=" else 2, text_line)
        elif _TABLE_ROW.match(line):
            if not _TABLE_RULE.match(line):  # the |---|---| line says nothing
                reader.start("table", line)
            else:
                reader.kind = "table"
        elif _LIST_ITEM.match(line):
            reader.start("list", line)
        elif reader.kind == "list" and (line.startswith((" ", "\t")) or not blank_before):
            reader.pending.append(line)  # an item's continuation or a nested item
        else:
            if reader.kind != "paragraph":
                reader.flush()
            reader.pending.append(re.sub(r"^ {0,3}>[ \t]?", "", line))
        blank_before = False
    reader.flush()
    return ParsedDocument(reader.title, reader.blocks)


# -- HTML ---------------------------------------------------------------------------------------

_SKIPPED = frozenset({"script", "style", "noscript", "template", "head", "svg", "iframe", "object"})
_VOID = frozenset(
    {
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "source",
        "track",
        "wbr",
    }
)
_BREAKS = frozenset(
    {
        "p", "div", "section", "article", "main", "header", "footer", "aside", "nav", "blockquote",
        "pre", "dl", "dt", "dd", "figure", "figcaption", "address", "form", "fieldset", "br", "hr",
    }
)  # fmt: skip
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)


def _tidy(line: str) -> str:
    """A list's or table's line with its runs of white space made one, its indent kept."""
    indent = line[: len(line) - len(line.lstrip(" "))]
    return indent + re.sub(r"\s+", " ", line).strip()


def _hidden(tag: str, attrs: list[tuple[str, str | None]]) -> bool:
    found = dict(attrs)
    return (
        tag in _SKIPPED
        or "hidden" in found
        or (found.get("aria-hidden") or "").lower() == "true"
        or bool(_HIDDEN_STYLE.search(found.get("style") or ""))
    )


class _HtmlReader(HTMLParser):
    """HTML reduced to blocks: text of hidden elements, scripts and styles is dropped; each
    outermost list or table becomes one block, a line per item or row."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[tuple[str, bool]] = []  # (tag, hidden) of the elements open
        self.title_text: list[str] | None = None
        self.title: str | None = None
        self.h1: str | None = None
        self.path: list[tuple[int, str]] = []
        self.heading: tuple[int, list[str]] | None = None
        self.blocks: list[Block] = []
        self.text: list[str] = []  # the paragraph being read
        self.structure: tuple[Literal["list", "table"], list[str]] | None = None
        self.depth = 0  # lists and tables open inside the structure being read
        self.counters: list[int] = []  # the next number of each <ol> open (0: a <ul>)

    def _is_hidden(self) -> bool:
        return any(hidden for _, hidden in self.open)

    def _flush(self) -> None:
        text = re.sub(r"\s+", " ", "".join(self.text)).strip()
        self.text = []
        if text:
            self.blocks.append(Block(self.section, "paragraph", text))

    @property
    def section(self) -> tuple[str, ...]:
        return tuple(heading for _, heading in self.path)

    def _line(self, prefix: str) -> None:
        assert self.structure is not None
        self.structure[1].append(prefix)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title" and self.title is None:  # read even inside <head>, which is not
            self.title_text = []
        if tag not in _VOID:
            self._implied_end(tag)
            self.open.append((tag, _hidden(tag, attrs)))
        if self._is_hidden() or tag == "title":
            return
        if tag in ("ul", "ol", "table"):
            if self.structure is None:
                self._flush()
                self.structure = ("table" if tag == "table" else "list", [])
            else:
                self.depth += 1
            if tag != "table":
                self.counters.append(1 if tag == "ol" else 0)
        elif self.structure is not None:
            self._structure_tag(tag)
        elif tag in _HEADINGS:
            self._flush()
            self.heading = (_HEADINGS[tag], [])
        elif tag in _BREAKS or tag == "li":
            self._flush()

    def _structure_tag(self, tag: str) -> None:
        assert self.structure is not None
        lines = self.structure[1]
        if tag == "li":
            number = self.counters[-1] if self.counters else 0
            indent = "  " * max(len(self.counters) - 1, 0)
            lines.append(f"{indent}{number}. " if number else f"{indent}- ")
            if number:
                self.counters[-1] += 1
        elif tag == "tr":
            lines.append("|")
        elif tag in ("td", "th") and lines:
            lines[-1] += " "
        elif tag in _BREAKS and lines:
            lines[-1] += " "

    def _implied_end(self, tag: str) -> None:
        """`<p>`, `<li>` and table cells close the one still open before them."""
        closes = {
            "p": ("p",),
            "li": ("li",),
            "tr": ("tr", "td", "th"),
            "td": ("td", "th"),
            "th": ("td", "th"),
        }
        barrier = {"li": ("ul", "ol"), "tr": ("table",), "td": ("tr",), "th": ("tr",)}.get(tag, ())
        if tag not in closes:
            return
        for index in range(len(self.open) - 1, -1, -1):
            name = self.open[index][0]
            if name in barrier:
                return
            if name in closes[tag]:
                self._end(name)
                return

    def handle_endtag(self, tag: str) -> None:
        if any(name == tag for name, _ in self.open):
            while self.open:
                if self._end(self.open[-1][0]) == tag:
                    break

    def _end(self, tag: str) -> str:
        was_hidden = self._is_hidden()
        name, _ = self.open.pop()
        if tag == "title" and self.title_text is not None:
            self.title = re.sub(r"\s+", " ", "".join(self.title_text)).strip() or None
            self.title_text = None
        if was_hidden:
            return name
        if name in ("ul", "ol", "table"):
            if name != "table" and self.counters:
                self.counters.pop()
            if self.depth:
                self.depth -= 1
            elif self.structure is not None:
                kind, lines = self.structure
                self.structure = None
                text = "\n".join(_tidy(line) for line in lines if line.strip(" |-"))
                if text:
                    self.blocks.append(Block(self.section, kind, text))
        elif name in ("td", "th") and self.structure is not None:
            self.structure[1][-1] += " |"
        elif name in _HEADINGS and self.heading is not None:
            level, parts = self.heading
            self.heading = None
            text = re.sub(r"\s+", " ", "".join(parts)).strip()
            while self.path and self.path[-1][0] >= level:
                self.path.pop()
            if text:
                self.path.append((level, text))
                if level == 1 and self.h1 is None:
                    self.h1 = text
        elif name in _BREAKS and self.structure is None:
            self._flush()
        return name

    def handle_data(self, data: str) -> None:
        if self.title_text is not None:
            self.title_text.append(data)
            return
        if self._is_hidden():
            return
        if self.heading is not None:
            self.heading[1].append(data)
        elif self.structure is not None:
            if self.structure[1]:
                self.structure[1][-1] += data
            elif data.strip():
                self.structure[1].append(data)
        else:
            self.text.append(data)


def _parse_html(text: str) -> ParsedDocument:
    reader = _HtmlReader()
    reader.feed(text)
    reader.close()
    while reader.open:
        reader._end(reader.open[-1][0])
    reader._flush()
    return ParsedDocument(reader.title or reader.h1, reader.blocks)


# -- PDF ----------------------------------------------------------------------------------------


def _parse_pdf(content: bytes) -> ParsedDocument:
    from pypdf import PdfReader  # imported when a PDF comes: most deployments never see one

    try:
        reader = PdfReader(io.BytesIO(content))
        if reader.is_encrypted:
            raise InvalidDocument("the PDF is encrypted: upload it without a password")
        pages = [page.extract_text() or "" for page in reader.pages]
        title = reader.metadata.title if reader.metadata else None
    except InvalidDocument:
        raise
    except Exception as exc:  # a broken file can fail anywhere inside the parser
        raise InvalidDocument(f"the PDF could not be read: {exc or type(exc).__name__}") from None
    if not pages:
        raise InvalidDocument("the PDF has no pages")
    blocks = [
        Block((), "paragraph", paragraph)
        for page in pages
        for paragraph in _paragraphs(page.replace("\x00", ""))
    ]
    if not blocks:
        raise InvalidDocument("the PDF has no text (a scanned PDF needs text recognition first)")
    return ParsedDocument(
        title.strip() if isinstance(title, str) and title.strip() else None, blocks
    )
