"""The W3C Entity Reconciliation API (0.2 and 1.0-draft) over one context.

``/api/v1/contexts/{ctx}/reconcile`` answers with the API token header (or a dashboard
session); ``/api/v1/contexts/{ctx}/reconcile/k/{key}`` with a read-only key in the path,
for clients that cannot send headers (OpenRefine). Below either root:

- ``GET`` the root: the 0.2 manifest, listing both versions (``?version=1.0-draft``: the
  1.0-draft manifest; the two disagree on how suggest services are described);
  ``queries=`` (GET or a form POST) the 0.2 match, ``extend=`` the 0.2 data extension;
- ``POST match`` and ``POST extend`` (JSON): the 1.0-draft match and extension;
- ``GET suggest/entity|type|property?prefix=``, ``GET preview?id=``,
  ``GET extend/propose?type=``.

Every answer carries CORS headers for any origin (no cookies are honoured cross-site:
the header or the key is the credential). See docs/decisions/0085 and 0086.

``views``: what every endpoint shares; ``match``: the manifest, the 0.2 root and the
1.0-draft match; ``extend``: data extension; ``suggest``: suggest and preview.
"""
