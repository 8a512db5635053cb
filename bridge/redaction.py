"""Secrets kept out of what people and logs see: API keys in error text, credentials in URLs.

One place for every rule, so each place that shows a message or a URL (the log filter, ``cluster
status``, a cluster role's start line, ``doctor``) hides the same things the same way.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"
_KEY_RE = re.compile(r"\b(sk-[A-Za-z0-9_\-]{4})[A-Za-z0-9_\-]+")
_SECRET_PARAMS = frozenset({"password", "pass", "pwd", "token", "secret", "api_key", "apikey"})


def redact(text: str, *secrets: str | None) -> str:
    """Remove the secrets (an API key, a URL's password) and anything shaped like an API key from
    a message shown to people or logs."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    return _KEY_RE.sub(rf"\1{MASK}", text)


def url_secrets(url: str | None) -> list[str]:
    """The credentials a URL carries (the password of ``scheme://user:password@host``, and query
    parameters such as ``?password=``), for the log filter to replace wherever they appear."""
    if not url:
        return []
    parts = urlsplit(url)
    found = [parts.password] if parts.password else []
    found += [value for key, value in parse_qsl(parts.query) if key.lower() in _SECRET_PARAMS and value]
    return found


def redact_url(url: str | None) -> str:
    """``url`` as it may be shown: its password and secret query parameters replaced by ``***``
    (``redis://:S3cret@host:6379/0`` → ``redis://:***@host:6379/0``); the user name, host, port
    and path stay, so the operator still sees where it points."""
    if not url:
        return ""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        userinfo, _, host = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:{MASK}@{host}"
    query = parts.query
    if any(key.lower() in _SECRET_PARAMS for key, _ in parse_qsl(query)):
        query = urlencode([(key, MASK if key.lower() in _SECRET_PARAMS else value)
                           for key, value in parse_qsl(query, keep_blank_values=True)], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
