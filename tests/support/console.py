"""Console helpers for tests: sign in through the form and read a form's hidden fields."""

from __future__ import annotations

import re
from typing import Any

_FIELD = re.compile(r'<input type="hidden" name="(\w+)" value="([^"]*)">')


def hidden_fields(html: str, form_id: str | None = None) -> dict[str, str]:
    """The hidden inputs of the page's first form (or of the form with ``form_id``)."""
    if form_id is not None:
        start = html.index(f'id="{form_id}"')
        html = html[start:html.index("</form>", start)]
    return dict(_FIELD.findall(html))


def sign_in(client: Any, token: str) -> Any:
    """The sign-in exchange as a browser does it: the form, its nonce cookie, the POST."""
    form = client.get("/console/signin")
    assert form.status_code == 200, form.text
    return client.post("/console/signin", data={"token": token, **hidden_fields(form.text)},
                       follow_redirects=False)
