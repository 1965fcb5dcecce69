"""Reconciliation: which entities of a context a row of someone else's table names, and
what a reconciling client asks around it (the W3C Entity Reconciliation API's reads).

- ``properties``: what a property id names (an identifier kind, an attribute key, a
  predicate);
- ``match``: a query made into the duplicate model's record, its candidates and their
  scores, and entities named by id;
- ``suggest``: the autocompletion of entities, types and properties, and an entity's
  preview card;
- ``extend``: data extension, the values of asked properties for entities already matched.
"""
