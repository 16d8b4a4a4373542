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
    """What django-axes answers once a user name has failed too often from an address, or
    an address too often across names: the sign-in page again, saying which, for how long,
    and the command that lifts it (429, as axes does)."""
    from queue_engine.console.lockout import lock_of  # django-axes is installed

    lock = lock_of(request, credentials)
    wait = duration(settings.AXES_COOLOFF_TIME)
    if lock.scope == "address":
        why = "Too many failed sign-ins from this address, for several user names"
    else:
        why = f"Too many failed sign-ins for the user name {lock.name!r} from this address"
    form = AuthenticationForm(request, initial={"username": request.POST.get("username", "")})
    return render(
        request,
        "queue_engine/login.html",
        {
            "form": form,
            "next": request.POST.get("next") or request.GET.get("next", ""),
            "locked": f"{why}: signing in is refused for {wait}. Wait and try again, or ask "
            "an administrator to lift the lock with",
            "lift": lock.lift,
        },
        status=429,
    )
