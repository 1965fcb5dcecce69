"""Token authentication: one statement reads all that resolving access needs, and the
token's last use is written at most once a minute."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest
from django.utils import timezone

from memory.domain.access import context_access_resolve
from memory.kernel.errors import NotFound
from memory.models import ApiToken, Context, ContextMembership, Role, TokenPurpose
from memory.services.tokens import LAST_USED_RESOLUTION, _stamp_use, token_authenticate, token_issue


@pytest.fixture
def issued(context: Context, make_user: Callable[..., Any]) -> tuple[ApiToken, str]:
    user = make_user(context=context, role=Role.CURATOR)
    token = token_issue(user=user, context=context, grants=["read:org/*"])
    return token.token, token.raw


def test_a_token_resolves_its_access_in_one_statement(
    issued: tuple[ApiToken, str], context: Context, django_assert_num_queries: Any
) -> None:
    _, raw = issued
    token_authenticate(raw, purpose=TokenPurpose.API)  # the first use is stamped
    with django_assert_num_queries(1):
        found = token_authenticate(raw, purpose=TokenPurpose.API)
        assert found is not None
        access = context_access_resolve(user=found.user, slug=context.slug, token=found)
    assert (access.context, access.role, str(access.grants)) == (
        context,
        Role.CURATOR,
        "read:org/*",
    )
    with pytest.raises(NotFound):  # a token names one context
        context_access_resolve(user=found.user, slug="another", token=found)


def test_a_token_of_a_user_no_longer_a_member_finds_no_context(
    issued: tuple[ApiToken, str], context: Context
) -> None:
    token, raw = issued
    ContextMembership.objects.filter(user=token.user, context=context).delete()
    found = token_authenticate(raw, purpose=TokenPurpose.API)
    assert found is not None
    with pytest.raises(NotFound):
        context_access_resolve(user=found.user, slug=context.slug, token=found)


def test_last_use_is_written_once_a_minute(
    issued: tuple[ApiToken, str], django_assert_num_queries: Any
) -> None:
    token, raw = issued
    with django_assert_num_queries(2):  # the look-up, the first stamp
        token_authenticate(raw, purpose=TokenPurpose.API)
    first = ApiToken.objects.get(pk=token.pk).last_used_at
    assert first is not None
    with django_assert_num_queries(1):  # a minute has not passed: the look-up only
        token_authenticate(raw, purpose=TokenPurpose.API)
    assert ApiToken.objects.get(pk=token.pk).last_used_at == first
    stale = timezone.now() - LAST_USED_RESOLUTION - dt.timedelta(seconds=1)
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=stale)
    with django_assert_num_queries(2):
        token_authenticate(raw, purpose=TokenPurpose.API)
    assert ApiToken.objects.get(pk=token.pk).last_used_at > stale  # type: ignore[operator]


def test_of_requests_that_all_found_the_stamp_stale_one_writes_it(
    issued: tuple[ApiToken, str],
) -> None:
    token, _ = issued
    stale = timezone.now() - 2 * LAST_USED_RESOLUTION
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=stale)
    first, second = ApiToken.objects.get(pk=token.pk), ApiToken.objects.get(pk=token.pk)
    _stamp_use(first)
    written = ApiToken.objects.get(pk=token.pk).last_used_at
    _stamp_use(second)  # read the stale stamp too; its update finds the row fresh
    assert ApiToken.objects.get(pk=token.pk).last_used_at == written != stale


def test_a_revoked_token_or_an_inactive_user_is_refused(
    issued: tuple[ApiToken, str], context: Context
) -> None:
    token, raw = issued
    assert token_authenticate(raw, purpose=TokenPurpose.API, context_slug=context.slug) == token
    assert token_authenticate(raw, purpose=TokenPurpose.RECONCILE) is None
    assert token_authenticate(raw, purpose=TokenPurpose.API, context_slug="another") is None
    token.user.is_active = False
    token.user.save()
    assert token_authenticate(raw, purpose=TokenPurpose.API) is None
    token.user.is_active = True
    token.user.save()
    ApiToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())
    assert token_authenticate(raw, purpose=TokenPurpose.API) is None
