"""The manual's settings reference lists every engine option with its real default."""

from __future__ import annotations

import ast
import re

from queue_engine.conf import DEFAULTS
from tests.support.doc_blocks import DOCS

ROW = re.compile(r"^\| `(?P<key>[A-Z_]+)` \| `(?P<default>[^|]+)` \|", re.M)


def documented() -> dict[str, object]:
    page = (DOCS / "reference" / "settings.md").read_text()
    section = page.split("## QUEUE_ENGINE", 1)[1].split("\n## ", 1)[0]
    return {m["key"]: ast.literal_eval(m["default"]) for m in ROW.finditer(section)}


def test_the_settings_reference_lists_every_option_with_its_default() -> None:
    assert documented() == DEFAULTS
