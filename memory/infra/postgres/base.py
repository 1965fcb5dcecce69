"""Django's PostgreSQL backend, with a health check that costs no round trip.

``CONN_HEALTH_CHECKS`` makes Django check a persistent connection before the first
statement of each request, so that a connection the server closed (a restart, a
failover, an idle timeout of a pooler) is replaced instead of failing the request. Its
check is ``SELECT 1``: a round trip on every request, a third of a store's get.

A server that closes a connection writes its reason and closes the socket, so an idle
connection with anything to read is one to doubt. This backend polls the socket without
waiting: nothing to read and the connection passes; anything to read (or a poll that
fails) and Django's own ``SELECT 1`` decides, as before. A peer that vanishes without
closing (a host powered off) is caught by neither until TCP gives up, as before.
"""

from __future__ import annotations

import select

from django.db.backends.postgresql import base


class DatabaseWrapper(base.DatabaseWrapper):
    # Django's own attributes (since 4.1), which django-stubs does not declare.
    health_check_enabled: bool
    health_check_done: bool

    def close_if_health_check_failed(self) -> None:
        if (
            self.connection is not None
            and self.health_check_enabled
            and not self.health_check_done
            and not self.pool
            and self._quiet()
        ):
            self.health_check_done = True
            return
        super().close_if_health_check_failed()

    def _quiet(self) -> bool:
        """Whether the idle connection's socket has nothing to read."""
        try:
            poller = select.poll()
            poller.register(self.connection.fileno(), select.POLLIN | select.POLLPRI)
            return not poller.poll(0)
        except (OSError, ValueError):  # a closed or broken connection: ask the server
            return False
