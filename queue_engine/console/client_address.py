"""Which address a request comes from, as the sign-in limit and the /metrics throttle
count it.

REMOTE_ADDR, unless it is one of QUEUE_ENGINE["TRUSTED_PROXIES"]: then the
X-Forwarded-For header is read from its right end (what the nearest proxy appended),
passing over the trusted proxies, and the first address that is not one is the client's.
With no trusted proxies the header is never read: anyone can write it.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from django.http import HttpRequest

from queue_engine.conf import option

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=8)
def networks(proxies: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(p.strip(), strict=False) for p in proxies)


def trusted(address: str, proxies: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in proxies)


def client_address(request: HttpRequest) -> str:
    remote = str(request.META.get("REMOTE_ADDR") or "")
    proxies = networks(tuple(option("TRUSTED_PROXIES")))
    if not proxies or not trusted(remote, proxies):
        return remote
    hops = [h.strip() for h in str(request.META.get("HTTP_X_FORWARDED_FOR", "")).split(",")]
    for hop in reversed([h for h in hops if h]):
        try:
            address = str(ipaddress.ip_address(hop))
        except ValueError:
            return remote  # not written by a proxy of ours: count the proxy itself
        if not trusted(address, proxies):
            return address
    return remote
