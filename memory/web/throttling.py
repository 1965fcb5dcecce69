"""The API's rate limits, kept as one small window per caller.

DRF's rate throttles keep the time of each of a caller's requests in the last window, a
list read from the cache and written back whole (pickled) on every request: the longer
the list, the dearer each request. At the items API's rate (60,000 a minute, a store
called like a database) a busy agent's list held thousands of times, and the throttle
cost a store's get more than DRF's whole view machinery.

These keep, per caller, one window and its count: the window opens at the caller's first
request and takes ``rate`` requests; the next is refused, told to wait until the window
closes, and the first request after that opens the next. A burst is refused where DRF
refused it (the ``rate + 1``-th request inside a minute) with the same ``Retry-After``; a
caller spreading its requests may now fit up to twice the rate across the turn of two
windows, which DRF's list did not allow. Counters live in CACHES, as the lists did (per
process, or shared through ``MEMORY_CACHE=database``).
"""

from __future__ import annotations

from typing import Any

from rest_framework import throttling
from rest_framework.request import Request


class RateBudget(throttling.SimpleRateThrottle):
    """``SimpleRateThrottle``'s rates, scopes and cache keys; one window per key."""

    def allow_request(self, request: Request, view: Any) -> bool:
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        requests, window = self.parse_rate(self.rate)
        assert requests and window
        now = self.timer()
        opened, count = self.cache.get(self.key, (now, 0))
        if now >= opened + window:
            opened, count = now, 0
        if count >= requests:
            self.wait_seconds = opened + window - now
            return False
        self.cache.set(self.key, (opened, count + 1), max(1, round(opened + window - now)))
        return True

    def wait(self) -> float | None:
        return getattr(self, "wait_seconds", None)


class AnonRateThrottle(RateBudget, throttling.AnonRateThrottle):
    """Per client address, for callers without credentials (``anon``)."""


class UserRateThrottle(RateBudget, throttling.UserRateThrottle):
    """Per user (``user``)."""
