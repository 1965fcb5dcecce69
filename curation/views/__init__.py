"""Dashboard views, one module per screen."""

from curation.views.home import home

__all__ = ["home"]
