"""Django settings for STARK Studio, read from environment variables (see the README's settings table)."""

from __future__ import annotations

import os
from pathlib import Path

from stark_web.env import (
    database_config,
    envbool,
    envint,
    envlist,
    envstr,
    redis_url,
    secret_key,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(envstr("STARK_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)
if VAR_DIR.stat().st_uid == os.geteuid():
    VAR_DIR.chmod(0o700)  # secret_key, local_login.txt, the database: never readable by harness children (other uid)

PRODUCTION = envbool("STARK_PRODUCTION", False)
DEBUG = envbool("DEBUG", False)
SECRET_KEY = secret_key("SECRET_KEY", PRODUCTION, VAR_DIR)
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", [])
SITE_URL = envstr("SITE_URL", "")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_rq",
    "stark_web",
    "search.apps.SearchConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "stark_web.urls"
ASGI_APPLICATION = "stark_web.asgi.application"
WSGI_APPLICATION = "stark_web.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": database_config("DATABASE_URL", VAR_DIR)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = redis_url("REDIS_URL", "redis://127.0.0.1:6379/0")
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        # redis-py >= 8 reads with a 5 s socket timeout by default, the same as channels_redis' BZPOPMIN
        # wait: an idle socket then dies with TimeoutError. Give reads room beyond that wait.
        "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 30}], "capacity": 1500, "expiry": 30},
    }
}
RQ_QUEUES = {
    "search": {"URL": REDIS_URL, "DEFAULT_TIMEOUT": envint("STARK_SEARCH_JOB_TIMEOUT", 1800, minimum=10)},
    "gpu": {"URL": REDIS_URL, "DEFAULT_TIMEOUT": envint("STARK_GPU_JOB_TIMEOUT", 1800, minimum=10)},
}
# Queues whose workers /healthz requires; a web-only host may relax this.
STARK_REQUIRED_QUEUES = envlist("STARK_REQUIRED_QUEUES", ["search", "gpu"])

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "static"

# Uploads of problem files are small Python sources.
STARK_MAX_UPLOAD_BYTES = envint("STARK_MAX_UPLOAD_BYTES", 256 * 1024, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = STARK_MAX_UPLOAD_BYTES * 4
FILE_UPLOAD_MAX_MEMORY_SIZE = STARK_MAX_UPLOAD_BYTES * 4

SESSION_COOKIE_SECURE = PRODUCTION
CSRF_COOKIE_SECURE = PRODUCTION
SECURE_CONTENT_TYPE_NOSNIFF = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "INFO")},
}
