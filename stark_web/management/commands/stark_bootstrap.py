"""First-run set-up: make sure a local account exists and say how to log in."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the local admin account on first run (credentials kept in var/local_login.txt) and print how to log in."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default="admin")
        parser.add_argument("--url", default="http://127.0.0.1:8000", help="The site's address, for the printed link.")

    def handle(self, *args, username: str, url: str, **options) -> None:
        credentials = settings.VAR_DIR / "local_login.txt"
        user_model = get_user_model()
        user = user_model.objects.filter(username=username).first()
        if user is None or not credentials.exists():
            password = secrets.token_urlsafe(12)
            if user is None:
                user = user_model.objects.create_superuser(username=username, email="", password=password)
            else:
                user.set_password(password)
                user.save(update_fields=["password"])
            credentials.parent.mkdir(parents=True, exist_ok=True)
            credentials.write_text(f"{username}\n{password}\n")
            credentials.chmod(0o600)
        name, password = credentials.read_text().split()[:2]
        self.stdout.write(
            f"\n  STARK Studio is at {url}/\n"
            f"  Log in at {url}/accounts/login/ as '{name}' with password '{password}'\n"
            f"  (kept in {credentials}; delete that file to get a new password on the next start)\n"
        )
