"""How the backend is configured: the server's settings, declared once
(:mod:`backend.config.settings`) and the files generated from them
(:mod:`~backend.config.settings_docs`); a project's own settings, stored with it
(:mod:`~backend.config.project_settings`); and what every message and log line may show of a
value: the credential net (:mod:`~backend.config.redact`), the cut echo
(:mod:`~backend.config.echo`) and the logging set-up (:mod:`~backend.config.logs`).

May import :mod:`backend.store` (a project's settings are kept in its directory), no other
backend package.
"""
