"""Settings of the orders example: one app, no database, NATS from the environment."""

import os

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "dev-only-not-secret")
DEBUG = os.environ.get("DJANGO_DEBUG", "") == "1"
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1").split(",")

INSTALLED_APPS = ["orders"]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
]
ROOT_URLCONF = "orders_site.urls"
WSGI_APPLICATION = "orders_site.wsgi.application"
DATABASES: dict = {}  # the orders live in JetStream
USE_TZ = True

# Read when the first request or command needs the client, never at import time.
NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")
NATS_TIMEOUT = float(os.environ.get("NATS_TIMEOUT", "2.0"))  # seconds, for connect and publish
ORDERS_STREAM = "ORDERS"
ORDERS_SUBJECT = "orders.new"
ORDERS_CONSUMER = "order-processor"

# The client logs connects and reconnects at INFO, problems at WARNING and up.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"jetstream_sync": {"handlers": ["console"], "level": "WARNING"}},
}
