"""The code blocks of the README and docs/, collected from the Markdown by Sybil (``sybil.parsers.markdown``'s
lexers: fenced blocks and directives in HTML comments), each with the directive written right before it.

A directive is an HTML comment on the line before a block (invisible where the Markdown is rendered):

- ``<!-- perfgate-docs: skip (why) -->``: the block is not run here; ``why`` says what it needs (a GPU and SGLang,
  a network, a checkout, minutes) and tests/test_docs_run.py checks that every skip has one;
- ``<!-- perfgate-docs: exits 0 1 1 -->``: the exit code of each command of a shell block, in order (default 0);
- ``<!-- perfgate-docs: checkout (why) -->``: the block runs in a directory that holds a copy of the checkout's
  baselines/, evidence/, fixtures/ and perftests/ (what a clone has besides the package, which the wheel provides).

The languages: ``bash`` (run, command by command), ``python`` (a test file is written into the user's project and
collected; other code runs), ``toml`` (a profile's or variants file's tables are merged into the project's and
loaded; a pyproject table is loaded by its reader), ``text`` (output and listings: never run).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from sybil import Document, Region, Sybil
from sybil.parsers.markdown.lexers import DirectiveInHTMLCommentLexer, FencedCodeBlockLexer

ROOT = Path(__file__).resolve().parent.parent

#: the documents whose blocks are collected, in the order they are run
DOCS = ("README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")))

#: the languages a block may have; only these are run, by what their name says
LANGUAGES = ("bash", "python", "toml", "text")

DIRECTIVES = ("skip", "exits", "checkout")


@dataclass(frozen=True)
class Directive:
    name: str  # one of DIRECTIVES
    arguments: str  # the rest of the comment: "(why)" for skip and checkout, the exit codes for exits
    line: int

    @property
    def reason(self) -> str:
        m = re.fullmatch(r"\((.+)\)", self.arguments.strip(), flags=re.S)
        return m.group(1).strip() if m else ""

    @property
    def exits(self) -> list[int]:
        return [int(x) for x in self.arguments.split()]


@dataclass(frozen=True)
class Block:
    doc: str  # relative to the repository root
    line: int  # of the opening fence
    language: str
    source: str
    directive: Directive | None = None

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"

    @property
    def skipped(self) -> bool:
        return self.directive is not None and self.directive.name == "skip"


@dataclass(frozen=True)
class _Code:
    language: str
    source: str


@dataclass(frozen=True)
class _Directive:
    name: str
    arguments: str


def _code_parser(document: Document) -> list[Region]:
    lexer = FencedCodeBlockLexer(language=r"[\w-]*")
    return [Region(r.start, r.end, parsed=_Code(r.lexemes["language"], str(r.lexemes["source"])))
            for r in lexer(document)]


def _directive_parser(document: Document) -> list[Region]:
    lexer = DirectiveInHTMLCommentLexer(directive=r"perfgate-docs", arguments=r".*?")
    out = []
    for r in lexer(document):
        name, _, rest = str(r.lexemes["arguments"]).strip().partition(" ")
        out.append(Region(r.start, r.end, parsed=_Directive(name, rest.strip())))
    return out


SYBIL = Sybil(parsers=[_code_parser, _directive_parser], path="..", filenames=[Path(d).name for d in DOCS])


def blocks(doc: str) -> list[Block]:
    """The fenced blocks of ``doc`` (a path relative to the repository root), each with its directive: a
    ``perfgate-docs`` comment with only blank space between it and the block."""
    document = SYBIL.parse(ROOT / doc)
    out: list[Block] = []
    pending: tuple[Directive, int] | None = None
    for ex in document:
        parsed = ex.region.parsed
        if isinstance(parsed, _Directive):
            pending = (Directive(parsed.name, parsed.arguments, ex.line), ex.region.end)
            continue
        directive = None
        # between them only the comment's end (the lexer's region stops before it) and blank space
        if pending is not None and re.fullmatch(r"\s*-*>?\s*", document.text[pending[1]:ex.region.start]):
            directive = pending[0]
        pending = None
        out.append(Block(doc, ex.line, parsed.language, parsed.source, directive))
    return out


def directives(doc: str) -> list[Directive]:
    """Every ``perfgate-docs`` comment of ``doc``, whether or not a block follows it."""
    document = SYBIL.parse(ROOT / doc)
    return [Directive(ex.region.parsed.name, ex.region.parsed.arguments, ex.line) for ex in document
            if isinstance(ex.region.parsed, _Directive)]


def indented_blocks(doc: str) -> list[int]:
    """The lines where an indented (unfenced) code block starts in ``doc``: Sybil collects only fenced ones.
    A line indented by 4 or more (7 in a list item) after a blank line, outside a fence."""
    lines = (ROOT / doc).read_text().splitlines()
    out, fence, prev_blank, in_list, in_code = [], False, True, False, False
    for i, line in enumerate(lines, start=1):
        indent = len(line) - len(line.lstrip())
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        elif not fence and line.strip():
            if re.match(r"\s*([-*+]|\d+[.)])\s", line):
                in_list = True
            elif not line.startswith(" "):
                in_list = False
            need = 7 if in_list else 4
            if indent >= need and (prev_blank or in_code):
                if not in_code:
                    out.append(i)
                in_code = True
            else:
                in_code = False
        prev_blank = not line.strip()
    return out


def commands(block: Block) -> list[tuple[str, int]]:
    """A shell block's commands with the exit code each must end with: its lines with ``\\`` continuations
    joined, comments and blank lines left out. The exit code: the block's ``exits`` directive, else what the
    line's own comment says (``# exit N``; a comment saying that something fails: 1, pytest's), else 0."""
    out: list[tuple[str, int]] = []
    cur = ""
    for raw in block.source.splitlines():
        line = raw.rstrip()
        if not cur and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        out.append(((cur + line).strip(), _said_exit(line)))
        cur = ""
    if cur.strip():
        out.append((cur.strip(), 0))
    if block.directive is not None and block.directive.name == "exits":
        codes = block.directive.exits
        assert len(codes) == len(out), f"{block.where}: {len(codes)} exit codes for {len(out)} commands"
        out = [(cmd, code) for (cmd, _), code in zip(out, codes)]
    return out


def _said_exit(line: str) -> int:
    comment = line.partition(" #")[2]
    m = re.search(r"\bexit (\d+)\b", comment)
    if m:
        return int(m.group(1))
    return 1 if re.search(r"\bfail(s)?\b", comment) else 0
