"""The manual's code blocks, as tests/docs runs them (docs/contributing.md says how to mark one).

- ```python title="myapp/jobs.py"```: a file of the page's example project, written under
  a temporary directory that the page's other blocks (and its workers) import from.
  Files named settings.py, urls.py and asgi.py are fragments of the host's own files.
- ```python```: run in the page's namespace, in page order; ```pycon```: a doctest there.
- ```sh```: its `python manage.py runworker ... --burst` lines run as real workers.
- ```yaml```: parsed.
- `<!-- docs-test: install -->` on the line before a block: the host-project set-up,
  run by the test that installs the engine into a fresh project, not in this process.
- `<!-- docs-test: skip REASON -->`: not run (a block that cannot run here; keep them rare).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)(?P<attrs>[^\n`]*)$")
TITLE = re.compile(r'title="(?P<title>[^"]+)"')
MARK = re.compile(r"^\s*<!-- docs-test: (?P<mark>install|skip)\b[^>]*-->\s*$")


@dataclass(frozen=True)
class Block:
    page: str  # relative to docs/
    line: int  # of the opening fence, counting from 1
    lang: str
    title: str | None
    mark: str | None
    code: str

    @property
    def where(self) -> str:
        return f"docs/{self.page}:{self.line}"


def pages() -> list[Path]:
    """Every page of the manual; docs/notes/ (helpers' notes, not in the build) is left out."""
    return sorted(p for p in DOCS.rglob("*.md") if "notes" not in p.relative_to(DOCS).parts)


def page_name(path: Path) -> str:
    return path.relative_to(DOCS).as_posix()


def blocks(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent = len(opening["indent"])
        end = i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        previous = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        mark = MARK.match(previous)
        title = TITLE.search(opening["attrs"])
        found.append(
            Block(
                page=page_name(path),
                line=i + 1,
                lang=opening["lang"],
                title=title["title"] if title else None,
                mark=mark["mark"] if mark else None,
                code="\n".join(line[indent:] for line in lines[i + 1 : end]) + "\n",
            )
        )
        i = end + 1
    return found


def all_blocks() -> list[Block]:
    return [block for path in pages() for block in blocks(path)]


def install_examples() -> list[Block]:
    """The host-project set-up (settings, urls, asgi) a fresh project's test applies."""
    return [block for block in all_blocks() if block.mark == "install"]
