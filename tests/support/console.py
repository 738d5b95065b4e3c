"""Console helpers for tests: sign in through the form and read a form's hidden fields."""

from __future__ import annotations

import re
from typing import Any

from adapters.settings import Settings
from api.http.auth import mint_token

_FIELD = re.compile(r'<input type="hidden" name="(\w+)" value="([^"]*)">')


def hidden_fields(html: str, form_id: str | None = None) -> dict[str, str]:
    """The hidden inputs of the page's first form (or of the form with ``form_id``)."""
    if form_id is not None:
        start = html.index(f'id="{form_id}"')
        html = html[start : html.index("</form>", start)]
    return dict(_FIELD.findall(html))


def sign_in(client: Any, token: str) -> Any:
    """The sign-in exchange as a browser does it: the form, its nonce cookie, the POST."""
    form = client.get("/console/signin")
    assert form.status_code == 200, form.text
    return client.post(
        "/console/signin", data={"token": token, **hidden_fields(form.text)}, follow_redirects=False
    )


def admin_session(browser: Any, settings: Settings) -> None:
    """Sign the console client in as an admin."""
    answer = sign_in(browser, mint_token(settings, subject="ops", role="admin"))
    assert answer.status_code == 303 and answer.headers["location"] == "/console"
