from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from memory.models import ApiToken, TokenPurpose
from memory.services.tokens import token_authenticate


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Token <token>``; the token is bound to one context and its grants."""

    keyword = "Token"

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).split()
        if header and header[0].lower() == b"bearer":
            # The common OAuth habit: say what this API wants instead of a bare 401.
            raise exceptions.AuthenticationFailed(
                "this API takes 'Authorization: Token <token>', not 'Bearer <token>'"
            )
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("use 'Authorization: Token <token>'")
        try:
            raw = header[1].decode()
        except UnicodeError as exc:
            raise exceptions.AuthenticationFailed("the token is not valid") from exc
        token = token_authenticate(raw, purpose=TokenPurpose.API)
        if token is None:
            raise exceptions.AuthenticationFailed("the token is not valid")
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "memory.web.authentication.ApiTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Token <token>` as printed by `manage.py issue_token`",
        }
