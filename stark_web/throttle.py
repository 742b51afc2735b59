"""Login throttling for the site's login and the admin's: after STARK_LOGIN_MAX_FAILURES failed
logins for one (user name, client address) within STARK_LOGIN_WINDOW_S seconds, that pair is refused, even
with the right password, until the window (counted from the first failure) ends. A successful login clears it.

Counts live in Redis (shared by every web process): INCR on a key that expires with the window. If Redis
does not answer, logins are not throttled (and an error is logged) rather than refused for everyone.
"""

from __future__ import annotations

import hashlib
import logging

from django import forms
from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest

log = logging.getLogger(__name__)


def client_address(request: HttpRequest | None) -> str:
    """REMOTE_ADDR, or behind a proxy the last address in STARK_CLIENT_IP_HEADER (the one the proxy added)."""
    if request is None:
        return "-"
    header = settings.STARK_CLIENT_IP_HEADER.strip()
    if header:
        forwarded = request.META.get("HTTP_" + header.upper().replace("-", "_"), "")
        last = forwarded.split(",")[-1].strip()
        if last:
            return last
    return request.META.get("REMOTE_ADDR") or "-"


def _key(username: str, address: str) -> str:
    return settings.STARK_REDIS_PREFIX + "login-failures:" + hashlib.sha256(f"{username.casefold()}\0{address}".encode()).hexdigest()


def _redis():
    import redis

    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)


def seconds_blocked(username: str, address: str) -> int:
    """How long this pair must still wait (0: it may try)."""
    key = _key(username, address)
    try:
        conn = _redis()
        count = int(conn.get(key) or 0)
        if count < settings.STARK_LOGIN_MAX_FAILURES:
            return 0
        return max(int(conn.ttl(key)), 1)
    except Exception as exc:  # noqa: BLE001 - Redis down: do not lock everyone out
        log.error("login throttle unavailable (Redis: %s); not throttling", exc)
        return 0


def record_failure(username: str, address: str) -> None:
    key = _key(username, address)
    try:
        with _redis().pipeline() as pipe:  # MULTI: concurrent failures are all counted
            pipe.set(key, 0, ex=settings.STARK_LOGIN_WINDOW_S, nx=True)
            pipe.incr(key)
            pipe.execute()
    except Exception as exc:  # noqa: BLE001
        log.error("login throttle unavailable (Redis: %s); failure not counted", exc)


def clear(username: str, address: str) -> None:
    try:
        _redis().delete(_key(username, address))
    except Exception as exc:  # noqa: BLE001
        log.error("login throttle unavailable (Redis: %s)", exc)


class ThrottledLogin(forms.Form):
    """Mixin for Django's login forms: refuse a throttled pair before checking the password."""

    request: HttpRequest | None

    def clean(self):
        username = str(self.cleaned_data.get("username") or "")
        address = client_address(self.request)
        wait = seconds_blocked(username, address)
        if wait:
            log.warning("login throttled: %r from %s (%d s left)", username, address, wait)
            raise forms.ValidationError(
                f"Too many failed logins for this user from your address; try again in {wait} s.",
                code="throttled")
        try:
            cleaned = super().clean()
        except forms.ValidationError:
            record_failure(username, address)
            raise
        clear(username, address)
        return cleaned


class LoginForm(ThrottledLogin, AuthenticationForm):
    pass


class AdminLoginForm(ThrottledLogin, AdminAuthenticationForm):
    pass
