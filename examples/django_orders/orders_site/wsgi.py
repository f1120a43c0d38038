"""The WSGI application (``gunicorn orders_site.wsgi``); no NATS connection is made here."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "orders_site.settings")
application = get_wsgi_application()
