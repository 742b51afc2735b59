"""`manage.py stark_token USERNAME`: create the user if needed and print a new API token."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from stark_web.studio.tokens import create_token


class Command(BaseCommand):
    help = "Print a new API token for USERNAME (the user is created, without a password, if it does not exist)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="cli", help="A label to tell tokens apart.")

    def handle(self, *args, username: str, name: str, **options) -> None:
        user, created = get_user_model().objects.get_or_create(username=username)
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
            self.stderr.write(f"created user {username!r} (no password; use the token or set one with changepassword)")
        self.stdout.write(create_token(user, name))
