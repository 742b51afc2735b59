from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from stark_web.studio import diagnostics, health
from stark_web.throttle import AdminLoginForm, LoginForm

handler400 = "stark_web.views.bad_request"
handler403 = "stark_web.views.permission_denied"
handler404 = "stark_web.views.not_found"
handler500 = "stark_web.views.server_error"

admin.site.login_form = AdminLoginForm  # throttled like the site's login (stark_web/throttle.py)

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("diagnostics/ping", diagnostics.diagnostics_ping, name="diagnostics-ping"),
    path("accounts/login/", auth_views.LoginView.as_view(authentication_form=LoginForm), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/rq/", include("django_rq.urls")),
    path("admin/", admin.site.urls),
    path("", include("stark_web.studio.urls")),  # the service's API and the UI pages live in the search app
]
