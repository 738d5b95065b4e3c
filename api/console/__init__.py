"""The operators' console: server-rendered pages (Jinja2) at ``/console`` for admins."""
