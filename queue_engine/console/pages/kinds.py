"""What the kinds page shows: every job kind this process knows, and its kill switch."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from queue_engine import reads


def kinds_context(request: HttpRequest) -> dict[str, Any]:
    page = reads.kinds()
    return {"page": "kinds", "kinds": page, "rows": page.rows}
