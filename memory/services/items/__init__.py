"""Items: exact JSON values under a namespace and a key (writes, TTL, the sweep)."""
