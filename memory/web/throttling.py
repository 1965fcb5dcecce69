"""The API's rate limits, kept as one number per caller.

DRF's rate throttles keep the time of each of a caller's requests in the last window, a
list read from the cache and written back whole (pickled) on every request: the longer
the list, the dearer each request. At the items API's rate (60,000 a minute, a store
called like a database) a busy agent's list held thousands of times, and the throttle
cost a store's get more than DRF's whole view machinery.

These keep, per caller, the time at which its budget will be whole again (the generic
cell rate algorithm): each request allowed moves it on by the window over the rate, and
a request that would move it more than a window ahead is refused, told to wait until it
would not. A caller may spend its whole rate at once, as before — the ``rate + 1``-th
request inside a window is refused — and then gets one request back every window / rate
seconds, rather than all of them when the window has passed. Counters live in CACHES, as
DRF's lists did (per process, or shared through ``MEMORY_CACHE=database``).
"""

from __future__ import annotations

from typing import Any

from rest_framework import throttling
from rest_framework.request import Request


class RateBudget(throttling.SimpleRateThrottle):
    """``SimpleRateThrottle``'s rates, scopes and cache keys; one number per key."""

    def allow_request(self, request: Request, view: Any) -> bool:
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        requests, window = self.parse_rate(self.rate)
        assert requests and window
        now = self.timer()
        whole_at = max(float(self.cache.get(self.key, now)), now) + window / requests
        ahead = whole_at - now - window
        if ahead > 0:
            self.wait_seconds = ahead
            return False
        self.cache.set(self.key, whole_at, window)
        return True

    def wait(self) -> float | None:
        return getattr(self, "wait_seconds", None)


class AnonRateThrottle(RateBudget, throttling.AnonRateThrottle):
    """Per client address, for callers without credentials (``anon``)."""


class UserRateThrottle(RateBudget, throttling.UserRateThrottle):
    """Per user (``user``)."""
