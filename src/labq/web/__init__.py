"""labq's web UI: server-rendered pages under ``/ui/`` (see ``docs/ui.md``).

:func:`labq.web.site.install` puts the pages and their static files on the API's
application; the pages read through the same repository and change things
through the same handlers as the API, so they obey the same permissions.
"""
