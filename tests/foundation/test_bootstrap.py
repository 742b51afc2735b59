"""stark_bootstrap prints the admin password once, when it creates the account, and keeps it nowhere; an
older checkout's plain-text var/local_login.txt is shown one last time and deleted."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command


def bootstrap() -> str:
    out = StringIO()
    call_command("stark_bootstrap", "--url", "http://127.0.0.1:8123", stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_the_password_is_printed_once_and_kept_nowhere(settings, tmp_path, django_user_model):
    settings.VAR_DIR = tmp_path
    first = bootstrap()
    password = first.split("with password '", 1)[1].split("'", 1)[0]
    assert django_user_model.objects.get(username="admin").check_password(password)
    assert "Log in at http://127.0.0.1:8123/accounts/login/ as 'admin'" in first
    assert "changepassword admin" in first and list(tmp_path.iterdir()) == []

    again = bootstrap()
    assert password not in again and "changepassword admin" in again


@pytest.mark.django_db
def test_a_legacy_plain_text_password_file_is_shown_once_and_deleted(settings, tmp_path, django_user_model):
    settings.VAR_DIR = tmp_path
    django_user_model.objects.create_superuser("admin", "", "old-secret-123")
    (tmp_path / "local_login.txt").write_text("admin\nold-secret-123\n")
    output = bootstrap()
    assert "old-secret-123" in output and "deleted" in output
    assert not (tmp_path / "local_login.txt").exists()
    assert "old-secret-123" not in bootstrap()
