"""The admin pages of the service's models open (lists and a run's page with its nodes inline)."""

from __future__ import annotations

import pytest
from django.test import Client


@pytest.mark.django_db
def test_admin_pages_open(django_user_model, redis_client):
    from stark_web.studio.models import Event, Node, Problem, Run
    from stark_web.studio.tokens import create_token

    admin = django_user_model.objects.create_superuser("root", password="pw-root-123")
    problem = Problem.objects.create(owner=admin, name="p", source="# p\n", hash="2" * 64)
    run = Run.objects.create(owner=admin, problem=problem, team="scripted")
    Node.objects.create(run=run, node_id=0, attempt=0, role="root", created_at=0.0)
    Event.objects.create(run=run, seq=1, type="run.status", payload={"status": "queued"})
    create_token(admin)
    client = Client()
    client.force_login(admin)
    for path in ("/admin/search/problem/", "/admin/search/run/", f"/admin/search/run/{run.pk}/change/",
                 "/admin/search/node/", "/admin/search/event/", "/admin/search/apitoken/"):
        assert client.get(path).status_code == 200, path
