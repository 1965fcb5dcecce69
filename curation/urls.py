"""Dashboard URLs. Included at the site root: ``path("", include("curation.urls"))``."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from curation import views

urlpatterns = [
    path("", views.home, name="home"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(next_page="login"), name="logout"),
]
