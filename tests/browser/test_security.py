"""The Content-Security-Policy in Chromium: no page breaks under it, and it is enforced."""

from __future__ import annotations

from typing import Any

from tests.browser.conftest import Server
from tests.support import console_data


def test_no_page_reports_a_policy_violation(new_page: Any, server: Server) -> None:
    data = console_data.seed()
    console_data.history(n=60)
    page = new_page("operator")
    urls = [
        "/",
        "/queues/",
        "/queues/emails/",
        "/jobs/",
        f"/jobs/{data.running.id}/",
        f"/jobs/{data.dead[-1].id}/",
        "/flows/",
        "/dead/",
        "/schedules/",
        "/workers/",
        "/audit/",
        "/jobs/999999999/",
    ]
    violations: list[str] = []
    page.on(
        "console", lambda m: violations.append(m.text) if "Content Security" in m.text else None
    )

    for url in urls:
        page.goto(server.url + url)
        page.wait_for_load_state("networkidle")
        if page.locator("[data-live]").count():
            page.wait_for_selector("[data-live].on", timeout=5000)  # websockets allowed too
    clean = list(violations)
    # The policy is enforced, and a violation is seen by the listener above: an inline
    # script injected into the page does not run, and is reported.
    ran = page.evaluate(
        """() => { const s = document.createElement("script");
                   s.textContent = "window.__inline_ran = true";
                   document.body.appendChild(s);
                   return window.__inline_ran === true; }"""
    )
    page.wait_for_timeout(200)

    assert clean == []
    assert not ran
    assert any("script-src" in v for v in violations)
    others = [e for e in page.errors if "Content Security" not in e]
    assert others == [
        "Failed to load resource: the server responded with a status of 404 (Not Found)"
    ]
