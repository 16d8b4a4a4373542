from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from queue_engine.templatetags.queue_engine import duration

login = auth_views.LoginView.as_view(
    template_name="queue_engine/login.html", redirect_authenticated_user=True
)
logout = auth_views.LogoutView.as_view()


def attempted_username(request: HttpRequest, credentials: Any = None) -> str:
    """The user name a failed sign-in is counted under. Django's login form does not cap
    its length, and django-axes stores it in 255 characters: a longer one is cut there
    (no real user name is that long) instead of failing the sign-in with a 500."""
    name = (credentials or {}).get("username") or request.POST.get("username", "")
    return str(name)[:255]


def locked_out(
    request: HttpRequest, response: HttpResponse | None = None, credentials: Any = None
) -> HttpResponse:
    """What django-axes answers once a user name or an address has failed too often: the
    sign-in page again, saying why it refuses and for how long (429, as axes does)."""
    wait = duration(settings.AXES_COOLOFF_TIME)
    form = AuthenticationForm(request, initial={"username": request.POST.get("username", "")})
    return render(
        request,
        "queue_engine/login.html",
        {
            "form": form,
            "next": request.POST.get("next") or request.GET.get("next", ""),
            "locked": (
                f"Too many failed sign-ins for this user name or from this address: signing "
                f"in is refused for {wait}. Wait and try again, or ask an administrator to "
                f"lift the lock (manage.py axes_reset_username NAME)."
            ),
        },
        status=429,
    )
