"""The project package of the Django orders example (settings, URLs, WSGI)."""
