"""First-run set-up: make sure a local admin account exists and say how to log in.

The password is made up and printed once, when the account is created; it is never written to disk
(an older version kept it in var/local_login.txt: that file is shown one last time, then deleted).
Forgot it? `python manage.py changepassword admin`.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the local admin account on first run, print its password once, and print how to log in."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default="admin")
        parser.add_argument("--url", default="http://127.0.0.1:8000", help="The site's address, for the printed link.")

    def handle(self, *args, username: str, url: str, **options) -> None:
        user_model = get_user_model()
        legacy = settings.VAR_DIR / "local_login.txt"
        reset = f"python manage.py changepassword {username}"
        if not user_model.objects.filter(username=username).exists():
            password = secrets.token_urlsafe(12)
            user_model.objects.create_superuser(username=username, email="", password=password)
            how = (f"with password '{password}'\n"
                   f"  (shown only now and stored nowhere in plain text; to set another: {reset})")
        elif legacy.exists():
            password = (legacy.read_text().split()[1:2] or ["?"])[0]
            how = (f"with password '{password}'\n"
                   f"  (deleted {legacy}, which kept it in plain text; note it now or set another: {reset})")
        else:
            how = f"with the password printed when the account was created (forgot it? {reset})"
        legacy.unlink(missing_ok=True)
        self.stdout.write(f"\n  STARK Studio is at {url}/\n  Log in at {url}/accounts/login/ as '{username}' {how}\n")
