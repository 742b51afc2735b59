"""The Account page: change one's own password, and list, create and revoke one's API tokens (stark_web.studio.tokens).

A new token's text is shown once, on the page that created it; only its digest is stored. Changing the password
keeps this browser logged in (update_session_auth_hash) and ends the user's other sessions; their websockets close
within STARK_SOCKET_AUTH_S (docs/api.md). Revoking a token stops the clients using it at once (API) or within
seconds (websockets)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import update_session_auth_hash
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import PasswordChangeForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from stark_web.studio import tokens
from stark_web.studio.models import ApiToken
from stark_web.studio.service.inputs import plain_text
from stark_web.studio.service.settings import SettingError

MAX_TOKENS = 20  # per user, from this page


@login_required
@require_http_methods(["GET", "POST"])
def account(request: HttpRequest) -> HttpResponse:
    password_form = PasswordChangeForm(request.user)
    created = ""
    status = 200
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "password":
            password_form = PasswordChangeForm(request.user, request.POST)
            if password_form.is_valid():
                user = password_form.save()
                update_session_auth_hash(request, user)  # this browser stays in; other sessions end
                messages.success(request, "Password changed. Your other sessions are logged out.")
                return redirect("pages:account")
            status = 400
        elif action == "create-token":
            try:
                name = plain_text(request.POST.get("name", ""), "name")[:100]
            except SettingError as exc:
                messages.error(request, exc.message)
                return redirect("pages:account")
            if ApiToken.objects.filter(user=request.user).count() >= MAX_TOKENS:
                messages.error(request, f"you already have {MAX_TOKENS} tokens; revoke one first")
                return redirect("pages:account")
            created = tokens.create_token(request.user, name)  # shown once, on this answer only
        elif action == "revoke-token":
            found = ApiToken.objects.filter(user=request.user, pk=_number(request.POST.get("token"))).first()
            if found is None:
                messages.error(request, "no such token of yours (already revoked?)")
            else:
                found.delete()
                messages.success(request, f"Token {found.prefix}… revoked: clients using it are refused now.")
            return redirect("pages:account")
        else:
            status = 400
    listed = ApiToken.objects.filter(user=request.user).order_by("-created_at")
    response = render(request, "pages/account.html", {"password_form": password_form, "tokens": listed,
                                                      "created": created}, status=status)
    response["Cache-Control"] = "no-store"  # a new token's text must not be cached
    return response


def _number(raw: object) -> int:
    try:
        return int(str(raw))
    except (TypeError, ValueError):
        return -1
