"""The dashboard's forms, one module per page family (the names of ``curation/views``).
They check the shape of input; the services decide what it means."""
