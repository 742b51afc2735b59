"""Login throttling on the site's login and the admin's, through the real views, middleware and
Redis: after N failures for a (user name, address) pair even the right password is refused, with the wait."""

from __future__ import annotations

import time

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

PASSWORD = "right-password-123"
LOGINS = {"site": "/accounts/login/", "admin": "/admin/login/"}


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("root", password=PASSWORD, is_staff=True, is_superuser=True)


@pytest.fixture
def limits(settings, redis_client):
    settings.STARK_LOGIN_MAX_FAILURES = 3
    settings.STARK_LOGIN_WINDOW_S = 2
    return settings


def login(path: str, password: str, address: str = "10.0.0.1", **extra: str):
    client = Client(REMOTE_ADDR=address, **extra)
    response = client.post(path, {"username": "root", "password": password, "next": "/"})
    return response, client


def logged_in(response, client) -> bool:
    return response.status_code == 302 and "_auth_user_id" in client.session


@pytest.mark.parametrize("where", list(LOGINS))
def test_the_right_password_is_refused_after_too_many_failures(staff, limits, where):
    path = LOGINS[where]
    for _ in range(3):
        response, client = login(path, "wrong")
        assert response.status_code == 200 and not logged_in(response, client)
    response, client = login(path, PASSWORD)
    assert not logged_in(response, client)
    text = response.content.decode()
    assert "Too many failed logins" in text and "try again in" in text
    # The pair is throttled, not the user: another address still gets in.
    assert logged_in(*login(path, PASSWORD, address="10.0.0.2"))
    # The window ends (counted from the first failure): the right password works again.
    time.sleep(2.2)
    assert logged_in(*login(path, PASSWORD))


def test_the_site_and_the_admin_share_the_count(staff, limits):
    for path in (LOGINS["site"], LOGINS["admin"], LOGINS["site"]):
        login(path, "wrong")
    assert not logged_in(*login(LOGINS["admin"], PASSWORD))


def test_a_successful_login_clears_the_failures(staff, limits):
    for _ in range(2):
        for _ in range(2):
            assert not logged_in(*login(LOGINS["site"], "wrong"))
        assert logged_in(*login(LOGINS["site"], PASSWORD))


def test_behind_a_proxy_the_client_address_comes_from_the_configured_header(staff, limits):
    limits.STARK_CLIENT_IP_HEADER = "X-Forwarded-For"
    for _ in range(3):
        login(LOGINS["site"], "wrong", address="192.0.2.1", HTTP_X_FORWARDED_FOR="spoofed, 203.0.113.7")
    assert not logged_in(*login(LOGINS["site"], PASSWORD, address="192.0.2.1",
                                HTTP_X_FORWARDED_FOR="203.0.113.7"))
    assert logged_in(*login(LOGINS["site"], PASSWORD, address="192.0.2.1", HTTP_X_FORWARDED_FOR="203.0.113.8"))


def test_every_page_carries_a_content_security_policy(client, staff):
    policy = client.get("/accounts/login/")["Content-Security-Policy"]
    assert "script-src 'self';" in policy and "frame-ancestors 'none'" in policy and "object-src 'none'" in policy
    client.force_login(staff)
    assert "script-src 'self';" in client.get("/runs/new/")["Content-Security-Policy"]
    # django-rq's admin pages (staff only) carry inline scripts.
    assert "script-src 'self' 'unsafe-inline'" in client.get("/admin/rq/")["Content-Security-Policy"]
