"""Django settings for STARK Studio, read from environment variables (see docs/settings.md)."""

from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from stark_web.env import (
    database_config,
    envbool,
    envchoice,
    envfloat,
    envint,
    envlist,
    envstr,
    eval_ceilings,
    header_name,
    instance_id,
    job_heartbeat_grace_s,
    job_heartbeat_s,
    private_redis_url,
    production_debug,
    proxy_ssl_header,
    redis_url,
    secret_key,
)
from stark_web.studio.startup import device_busy_settings, llm_base_urls, llm_prices, rules_analysis_limits

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(envstr("STARK_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)
if VAR_DIR.stat().st_uid == os.geteuid():
    VAR_DIR.chmod(0o700)  # secret_key, local_login.txt, the database: never readable by harness children (other uid)

PRODUCTION = envbool("STARK_PRODUCTION", False)
DEBUG = production_debug(PRODUCTION, envbool("DEBUG", False))
SECRET_KEY = secret_key("SECRET_KEY", PRODUCTION, VAR_DIR)
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", [])
SITE_URL = envstr("SITE_URL", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "stark_web",  # before django_rq: its `rqworker` maps the names search/gpu to this instance's queues
    "django_rq",
    "stark_web.studio.apps.SearchConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "stark_web.security.ContentSecurityPolicyMiddleware",
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

REDIS_URL = redis_url("REDIS_URL", private_redis_url(VAR_DIR))
# Every Redis key of this installation carries its instance name: two installations sharing one Redis never
# take each other's jobs, see each other's workers or hear each other's websocket groups.
STARK_INSTANCE = instance_id("STARK_INSTANCE", VAR_DIR)
STARK_REDIS_PREFIX = f"stark:{STARK_INSTANCE}:"
# The queues "search" and "gpu" by their names in Redis (a GPU host's `rq worker` names the latter).
STARK_QUEUE_NAMES = {"search": f"stark-{STARK_INSTANCE}-search", "gpu": f"stark-{STARK_INSTANCE}-gpu"}
CHANNEL_LAYERS = {
    "default": {
        # channels_redis with a sized pool that waits for a connection (stark_web/channel_layer.py).
        "BACKEND": "stark_web.channel_layer.PooledRedisChannelLayer",
        # redis-py >= 8 reads with a 5 s socket timeout by default, the same as channels_redis' BZPOPMIN
        # wait: an idle socket then dies with TimeoutError. Give reads room beyond that wait.
        "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 30}], "capacity": 1500, "expiry": 30,
                   "prefix": f"stark-{STARK_INSTANCE}"},
    }
}
RQ_QUEUES = {
    STARK_QUEUE_NAMES["search"]: {"URL": REDIS_URL,
                                  "DEFAULT_TIMEOUT": envint("STARK_SEARCH_JOB_TIMEOUT", 1800, minimum=10)},
    STARK_QUEUE_NAMES["gpu"]: {"URL": REDIS_URL, "DEFAULT_TIMEOUT": envint("STARK_GPU_JOB_TIMEOUT", 1800, minimum=10)},
}
RQ = {"WORKER_CLASS": "stark_web.studio.service.worker.Worker"}
# That worker's heartbeat (it reads them through the same readers: a GPU host's bare worker has no settings).
STARK_JOB_HEARTBEAT_S = job_heartbeat_s()
STARK_JOB_HEARTBEAT_GRACE_S = job_heartbeat_grace_s()
# Seconds between passes of the reaper (stark_web/studio/service/reaper.py).
STARK_REAP_INTERVAL_S = envint("STARK_REAP_INTERVAL_S", 30, minimum=1)
# Queues whose workers /healthz requires; a web-only host may relax this.
STARK_REQUIRED_QUEUES = envlist("STARK_REQUIRED_QUEUES", ["search", "gpu"])
if set(STARK_REQUIRED_QUEUES) - set(STARK_QUEUE_NAMES):
    raise ImproperlyConfigured(f"STARK_REQUIRED_QUEUES={','.join(STARK_REQUIRED_QUEUES)!r} names an unknown queue; "
                               "use the roles search and gpu, e.g. STARK_REQUIRED_QUEUES=search on a web-only host.")

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

# --- Policy: production hardening, users' limits, login throttling (docs/settings.md) ---
SESSION_COOKIE_SECURE = PRODUCTION
CSRF_COOKIE_SECURE = PRODUCTION
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# HTTPS: redirect plain HTTP (except /healthz, probed from inside the host) and tell browsers to stay on HTTPS.
SECURE_SSL_REDIRECT = envbool("STARK_SSL_REDIRECT", PRODUCTION)
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SECURE_HSTS_SECONDS = envint("STARK_HSTS_SECONDS", 31536000 if PRODUCTION else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("STARK_HSTS_INCLUDE_SUBDOMAINS", PRODUCTION)
SECURE_HSTS_PRELOAD = envbool("STARK_HSTS_PRELOAD", False)
# Behind a TLS-terminating proxy: STARK_PROXY_SSL_HEADER=X-Forwarded-Proto=https (only if the proxy sets it).
SECURE_PROXY_SSL_HEADER = proxy_ssl_header("STARK_PROXY_SSL_HEADER")
# Content-Security-Policy of every page (stark_web/security.py): scripts only from this site, no inline script.
STARK_CSP = envstr("STARK_CSP", "") or (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'")
# Preloading is a commitment the operator makes at hstspreload.org; without it the check's advice is moot.
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]

STARK_EVAL_CEILINGS = eval_ceilings()
STARK_LLM_BASE_URLS = llm_base_urls("STARK_LLM_BASE_URLS")
STARK_PRICES_JSON = llm_prices("STARK_PRICES_JSON")
# The offline rules team's analysis child (read by search/teams/rules/remote.py in the search worker).
STARK_RULES_ANALYSIS_TIMEOUT_S, STARK_RULES_ANALYSIS_MEMORY_MB = rules_analysis_limits()
device_busy_settings()  # the waits for a busy GPU (STARK_DEVICE_BUSY_*), read again by search.engine.busy
STARK_LOGIN_MAX_FAILURES = envint("STARK_LOGIN_MAX_FAILURES", 5, minimum=1)
STARK_LOGIN_WINDOW_S = envint("STARK_LOGIN_WINDOW_S", 300, minimum=1)
# Behind a proxy: the header whose last address is the client's (e.g. X-Forwarded-For), for the login throttle.
STARK_CLIENT_IP_HEADER = header_name("STARK_CLIENT_IP_HEADER")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": envchoice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR",
                                                                           "CRITICAL"))},
}

# Per-user limits (docs/settings.md): active runs, problem checks (each runs the problem in a harness
# child, so they are few and short), and how often a websocket re-checks that its user may still watch.
STARK_MAX_ACTIVE_RUNS = envint("STARK_MAX_ACTIVE_RUNS", 3, minimum=0)  # queued+running+paused; 0: no limit
STARK_CHECKS_PER_USER = envint("STARK_CHECKS_PER_USER", 2, minimum=1, maximum=100)
STARK_CHECKS_TOTAL = envint("STARK_CHECKS_TOTAL", 4, minimum=1, maximum=1000)
STARK_CHECK_TIMEOUT_S = envint("STARK_CHECK_TIMEOUT_S", 30, minimum=5, maximum=3600)
# A run for a device no live gpu worker serves: refused (400 naming the devices available), or created to wait for
# such a worker when this is on (stark_web/studio/service/devices.py).
STARK_QUEUE_ABSENT_DEVICES = envbool("STARK_QUEUE_ABSENT_DEVICES", False)
# A finished run's best attempt is re-timed side by side with the reference (stark_web/studio/service/retime.py).
STARK_RETIME_AT_END = envbool("STARK_RETIME_AT_END", True)
STARK_SOCKET_AUTH_S = envint("STARK_SOCKET_AUTH_S", 2, minimum=1, maximum=60)
STARK_SOCKET_POLL_S = envfloat("STARK_SOCKET_POLL_S", 5.0, minimum=0.1, maximum=3600)
# Floods: jobs a user may have queued without a run, and websockets a user may hold open.
STARK_MAX_QUEUED_RETIMES = envint("STARK_MAX_QUEUED_RETIMES", 3, minimum=0, maximum=1000)  # 0: no limit
STARK_MAX_QUEUED_PINGS = envint("STARK_MAX_QUEUED_PINGS", 2, minimum=1, maximum=1000)
STARK_MAX_SOCKETS_PER_USER = envint("STARK_MAX_SOCKETS_PER_USER", 20, minimum=1, maximum=10000)
# Websocket handshakes in flight per credential and per client address, per server process (stark_web/studio/sockets/handshake.py).
STARK_HANDSHAKES_PER_USER = envint("STARK_HANDSHAKES_PER_USER", 8, minimum=1, maximum=10000)
STARK_HANDSHAKES_PER_ADDRESS = envint("STARK_HANDSHAKES_PER_ADDRESS", 64, minimum=1, maximum=100000)
# Agents' steps one user may run at once on the search workers; 0: every live search worker but one, at least one
# (stark_web/studio/service/search_share.py).
STARK_SEARCH_SHARE_PER_USER = envint("STARK_SEARCH_SHARE_PER_USER", 0, minimum=0, maximum=10000)
STARK_CHANNEL_POOL_SIZE = envint("STARK_CHANNEL_POOL_SIZE", 500, minimum=10, maximum=100000)
STARK_CHANNEL_POOL_WAIT_S = envfloat("STARK_CHANNEL_POOL_WAIT_S", 5.0, minimum=0.1, maximum=60)
