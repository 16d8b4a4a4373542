"""Failed sign-ins, counted with django-axes: one user name from one address is locked
after AXES_FAILURE_LIMIT failures, and an address on its own only after
SIGN_IN_ADDRESS_LIMIT failures across names (many names guessed from one place). Behind
a reverse proxy every user can share one address: a pair lock keeps one person's typos,
or one attacker's guesses at one name, from locking out the rest of the team.

Only imported where django-axes is installed (settings name these functions, and the
app connects `log_lockout` when axes is in INSTALLED_APPS).

    AXES_LOCKOUT_PARAMETERS = "queue_engine.console.lockout.lockout_parameters"
    AXES_CLIENT_IP_CALLABLE = "queue_engine.console.lockout.client_ip"
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from shlex import quote
from typing import Any, Literal

from axes.attempts import get_cool_off_threshold
from axes.helpers import get_client_username, get_failure_limit
from axes.models import AccessAttempt
from django.db.models import Sum
from django.http import HttpRequest

from queue_engine.conf import option
from queue_engine.console.client_address import client_address

log = logging.getLogger(__name__)

PAIR = [["username", "ip_address"]]
ADDRESS = ["ip_address"]


def client_ip(request: HttpRequest) -> str:
    return client_address(request)


def address_failures(request: HttpRequest) -> int:
    """Failed sign-ins from the request's address within the cool-off, across names."""
    address = getattr(request, "axes_ip_address", None) or client_address(request)
    found = AccessAttempt.objects.filter(
        ip_address=address, attempt_time__gte=get_cool_off_threshold(request)
    ).aggregate(n=Sum("failures_since_start"))["n"]
    return int(found or 0)


def address_locked(request: HttpRequest) -> bool:
    return address_failures(request) >= int(option("SIGN_IN_ADDRESS_LIMIT"))


def lockout_parameters(request_or_attempt: Any, credentials: Any = None) -> list[Any]:
    """What axes counts failures by for this request: the (name, address) pair, or the
    address alone once it reached SIGN_IN_ADDRESS_LIMIT."""
    if isinstance(request_or_attempt, HttpRequest) and address_locked(request_or_attempt):
        return ADDRESS
    return PAIR


@dataclass(frozen=True)
class Lock:
    scope: Literal["address", "pair"]
    name: str
    address: str

    @property
    def lift(self) -> str:
        """The command that lifts this lock before its cool-off ends."""
        if self.scope == "address":
            return f"manage.py axes_reset_ip {quote(self.address)}"
        return f"manage.py axes_reset_ip_username {quote(self.address)} {quote(self.name)}"


def lock_of(request: HttpRequest, credentials: Any = None) -> Lock:
    scope: Literal["address", "pair"] = "address" if address_locked(request) else "pair"
    name = str(get_client_username(request, credentials) or "")
    address = getattr(request, "axes_ip_address", None) or client_address(request)
    return Lock(scope, name, address)


def log_lockout(sender: Any, request: HttpRequest, **kwargs: Any) -> None:
    """One warning when a lock starts. axes also signals each sign-in it refuses while
    locked: before counting it (axes_failures_since_start is None), or after, past the
    limit when AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT counts those too."""
    failures = getattr(request, "axes_failures_since_start", None)
    credentials = getattr(request, "axes_credentials", None)
    if failures is None:
        return
    lock = lock_of(request, credentials)
    if lock.scope == "address":
        limit = option("SIGN_IN_ADDRESS_LIMIT")
        what = f"from address {lock.address} for every user name"
    else:
        limit = get_failure_limit(request, credentials)
        what = f"for user name {lock.name!r} from address {lock.address}"
    if failures == limit:
        log.warning(
            "Sign-in locked %s after %d failures; `%s` lifts it.", what, failures, lock.lift
        )
