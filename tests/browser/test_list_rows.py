"""The lists as a new operator meets them: headers that sort look it, and j, k and Enter
go through the rows from the keyboard."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import console_data
from tests.support.browser import Server, screenshot

ACTIVE_ROW = "document.activeElement.closest('tbody tr')?.id || ''"
ROW_BACKGROUND = (
    "id => getComputedStyle(document.querySelector('#' + id + ' td:nth-child(2)')).backgroundColor"
)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_j_k_and_enter_move_through_the_rows_and_open_one(
    new_page: Any, server: Server, scheme: str
) -> None:
    console_data.seed()
    page = new_page("operator", color_scheme=scheme)
    page.goto(server.url + "/jobs/")
    rows = page.eval_on_selector_all("main tbody tr[id^=job-row-]", "rows => rows.map(r => r.id)")
    plain = page.evaluate(ROW_BACKGROUND, rows[1])

    page.keyboard.press("j")
    first = page.evaluate(ACTIVE_ROW)
    page.keyboard.press("j")
    second = page.evaluate(ACTIVE_ROW)
    marked = page.evaluate(ROW_BACKGROUND, rows[1])
    screenshot(page, f"rows-j-{scheme}")
    page.keyboard.press("k")
    back = page.evaluate(ACTIVE_ROW)
    unmarked = page.evaluate(ROW_BACKGROUND, rows[1])
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/jobs/{rows[0].removeprefix('job-row-')}/")

    assert (first, second, back) == (rows[0], rows[1], rows[0])
    assert marked != plain and unmarked == plain
    assert not page.errors


def test_j_and_k_type_into_fields_as_letters(new_page: Any, server: Server) -> None:
    console_data.seed()
    page = new_page("viewer")
    page.goto(server.url + "/jobs/")

    page.keyboard.press("/")
    page.keyboard.type("jk")

    assert page.input_value("#f-q") == "jk"
    assert page.evaluate(ACTIVE_ROW) == ""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_sortable_headers_show_that_they_sort_before_a_hover(
    new_page: Any, server: Server, scheme: str
) -> None:
    console_data.seed()
    page = new_page("viewer", color_scheme=scheme)
    page.goto(server.url + "/queues/")
    page.mouse.move(0, 0)

    marks = page.eval_on_selector_all(
        "th.sortable[aria-sort=none] a",
        """links => links.map(a => {
             const after = getComputedStyle(a, '::after');
             return [after.content, Number(after.opacity)];
           })""",
    )
    screenshot(page, f"sortable-headers-{scheme}")

    assert len(marks) >= 6
    assert all(content == '"↕"' and opacity >= 0.4 for content, opacity in marks)
