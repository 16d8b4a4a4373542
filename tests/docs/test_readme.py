"""The README is what a newcomer reads first: short, and every link into the manual works."""

from __future__ import annotations

import re

from tests.support.doc_blocks import DOCS

README = DOCS.parent / "README.md"


def test_the_readme_is_short_and_links_only_to_files_that_exist() -> None:
    text = README.read_text()
    links = re.findall(r"\]\(((?:docs|bench)/[^)#]+|CHANGELOG\.md)", text)

    assert len(text.splitlines()) <= 250
    assert len(links) > 20
    assert [link for link in links if not (README.parent / link).is_file()] == []
