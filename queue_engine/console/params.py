"""Reading query and form parameters without trusting them."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils.http import url_has_allowed_host_and_scheme


def int_param(params: Any, name: str) -> int | None:
    value = str(params.get(name, "")).strip()
    if value.isdigit() and len(value) < 19:
        return int(value)
    return None


def safe_next(request: HttpRequest, fallback: str) -> str:
    """The `next` parameter if it points into this site, else the fallback."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return fallback


def htmx_target(request: HttpRequest) -> str | None:
    """The id of the element an htmx request will swap, or None for a plain request (read
    from htmx's own headers, so that the console needs no middleware of the host's)."""
    if request.headers.get("HX-Request") != "true":
        return None
    return request.headers.get("HX-Target")
