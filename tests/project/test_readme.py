"""The README's "Two commands" section against the Makefile it describes."""

from __future__ import annotations

import re

from tests.support.workers import ROOT


def two_commands() -> str:
    readme = (ROOT / "README.md").read_text()
    return readme.split("## Two commands", 1)[1].split("\n## ", 1)[0]


def test_two_commands_says_how_to_choose_the_port_and_the_address() -> None:
    section = two_commands()

    named = set(re.findall(r"`make run (\w+)=", section))

    assert {"PORT", "HOST"} <= named
    makefile = (ROOT / "Makefile").read_text()
    assert all(f"$({name})" in makefile for name in named)
