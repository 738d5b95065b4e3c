"""Console sign-in through OpenID Connect against a real provider on loopback
(Authlib's authorization server): the whole redirect dance, the admin claim,
a member's session, a tampered state, a replayed code, sign-out ending the
session, the session ending at the ID token's exp and the rate limit on
starts. On memory, SQLite and the emulator (one table for the module).

The client's authentication at the token endpoint (``client_secret_basic``,
``client_secret_post``, ``private_key_jwt``, ``none``) is checked against the
same provider accepting one method only: each method is taken when it is
the registered one and refused when another is, on the memory store (the
store plays no part in it); the settings that cannot work and a key that does
not load are refused in one line."""

from __future__ import annotations

import contextlib
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from adapters.bootstrap import Ledger, build_ledger
from adapters.dynamodb.schema import create_table
from adapters.settings import Settings, SettingsError, load_settings
from api.cli import app as cli
from api.console.oidc import REFUSED, TOO_MANY
from api.console.ratelimit import RateLimit
from api.http.app import create_app
from domain.directory import DirectoryKind, actor_record_id
from domain.services.directory import put_record
from tests.support.cli import assert_one_line_failure
from tests.support.clocks import FixedClock
from tests.support.dynamodb_fixtures import new_table_name
from tests.support.oidc_provider import OidcProvider

PUBLIC_URL = "http://127.0.0.1"
USERS = {
    "alice": {"name": "Alice", "groups": ["staff", "ledger-admins"]},
    "bob": {"name": "Bob", "groups": ["staff"]},
    "carol": {"name": "Carol", "groups": ["staff"], "preferred_username": "m-carol"},
}
STORES = ["memory", "sqlite", pytest.param("dynamodb", marks=pytest.mark.dynamodb)]


@pytest.fixture(scope="module")
def idp() -> Iterator[OidcProvider]:
    with OidcProvider(
        USERS, client_id="ledger-console", redirect_uri=PUBLIC_URL + "/console/oidc/callback"
    ) as provider:
        yield provider


@pytest.fixture(scope="module")
def module_table(request: pytest.FixtureRequest) -> Iterator[str]:
    """One emulator table for every DynamoDB test of the module (sessions and
    flows are keyed by fresh random ids, so the tests never meet)."""
    client = request.getfixturevalue("dynamodb_client")
    name = new_table_name()
    create_table(client, name)
    yield name
    with contextlib.suppress(Exception):
        client.delete_table(TableName=name)


@pytest.fixture(params=STORES)
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def settings(
    idp: OidcProvider, store_kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> Settings:
    where: dict[str, str] = {}
    if store_kind == "sqlite":
        where = {"sqlite_path": str(tmp_path / "ledger.db")}
    elif store_kind == "dynamodb":
        where = {"dynamodb_table": request.getfixturevalue("module_table")}
    return load_settings(
        store=store_kind,
        env="test",
        public_url=PUBLIC_URL,
        console_oidc_issuer=idp.issuer,
        console_oidc_client_id=idp.client.client_id,
        console_oidc_client_secret=idp.client.client_secret,
        console_oidc_scope="openid profile groups",
        console_oidc_actor_claim="preferred_username",
        **where,
    )


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def ledger(
    settings: Settings, clock: FixedClock, store_kind: str, request: pytest.FixtureRequest
) -> Iterator[Ledger]:
    client = request.getfixturevalue("dynamodb_client") if store_kind == "dynamodb" else None
    wired = build_ledger(settings, clock=clock, dynamodb_client=client)
    yield wired
    if client is None:
        wired.close()


@pytest.fixture
def browser(settings: Settings, ledger: Ledger) -> Iterator[TestClient]:
    with TestClient(create_app(settings, ledger=ledger), base_url=PUBLIC_URL) as client:
        yield client


def to_provider(browser: TestClient, user: str) -> str:
    """Start at the sign-in page's link, sign in at the provider as ``user``:
    the callback URL (with code and state) the provider redirects the browser to."""
    page = browser.get("/console/signin")
    assert 'href="/console/oidc/start"' in page.text
    start = browser.get("/console/oidc/start", follow_redirects=False)
    assert start.status_code == 303
    authorize = start.headers["location"]
    query = parse_qs(urlsplit(authorize).query)
    assert query["code_challenge_method"] == ["S256"] and query["nonce"] and query["state"]
    with httpx.Client() as at_idp:
        assert at_idp.get(authorize).status_code == 200  # the provider's sign-in form
        back = at_idp.post(authorize, data={"username": user})
    assert back.status_code == 302, back.text
    callback = back.headers["location"]
    assert callback.startswith(PUBLIC_URL + "/console/oidc/callback?")
    return callback.removeprefix(PUBLIC_URL)


def session_cookie(answer: httpx.Response) -> str | None:
    for header in answer.headers.get_list("set-cookie"):
        found = re.match(r"ledger_console=([^;]+)", header)
        if found and found.group(1) != '""':
            return found.group(1)
    return None


def opens_console(browser: TestClient) -> bool:
    return browser.get("/console", follow_redirects=False).status_code == 200


def test_an_admin_signs_in_through_the_provider_and_sign_out_ends_it(
    browser: TestClient, ledger: Ledger, clock: FixedClock
) -> None:
    answer = browser.get(to_provider(browser, "alice"), follow_redirects=False)
    assert answer.status_code == 200, answer.text
    assert 'http-equiv="refresh" content="0; url=/console"' in answer.text
    cookie = session_cookie(answer)
    assert cookie is not None
    assert "SameSite=strict" in next(
        c for c in answer.headers.get_list("set-cookie") if c.startswith("ledger_console=")
    )
    console = browser.get("/console")
    assert console.status_code == 200 and "alice" in console.text
    csrf = re.search(r'name="csrf" value="([^"]+)"', console.text)
    assert csrf is not None
    out = browser.post("/console/signout", data={"csrf": csrf.group(1)}, follow_redirects=False)
    assert out.status_code == 303
    browser.cookies.set("ledger_console", cookie, path="/console")  # a copy of the cookie
    assert not opens_console(browser)


def test_the_session_expires(browser: TestClient, settings: Settings, clock: FixedClock) -> None:
    assert browser.get(to_provider(browser, "alice")).status_code == 200
    assert opens_console(browser)
    clock.advance(settings.console_session_seconds)
    assert not opens_console(browser)


def test_a_user_without_the_admin_claim_is_refused(browser: TestClient) -> None:
    answer = browser.get(to_provider(browser, "bob"), follow_redirects=False)
    assert answer.status_code == 401 and REFUSED in answer.text
    assert session_cookie(answer) is None
    assert not opens_console(browser)


def test_a_member_named_by_the_actor_claim_opens_only_their_inbox(
    browser: TestClient, ledger: Ledger, clock: FixedClock
) -> None:
    # not in the directory yet: refused like anyone without the admin claim
    refused = browser.get(to_provider(browser, "carol"), follow_redirects=False)
    assert refused.status_code == 401 and REFUSED in refused.text
    put_record(
        ledger.store,
        ledger.clock,
        kind=DirectoryKind.ACTOR,
        record_id=actor_record_id("m-carol"),
        values={"enabled": True},
        cache=ledger.context.cache,
    )
    answer = browser.get(to_provider(browser, "carol"), follow_redirects=False)
    assert answer.status_code == 200 and "url=/console/inbox" in answer.text
    inbox = browser.get("/console/inbox")
    assert inbox.status_code == 200 and "Your approvals" in inbox.text and "m-carol" in inbox.text
    assert browser.get("/console", follow_redirects=False).headers["location"] == "/console/inbox"


def test_the_session_ends_when_the_id_token_does(
    browser: TestClient, idp: OidcProvider, clock: FixedClock
) -> None:
    idp.id_token_seconds = 120  # shorter than LEDGER_CONSOLE_SESSION_SECONDS (900)
    try:
        answer = browser.get(to_provider(browser, "alice"), follow_redirects=False)
    finally:
        idp.id_token_seconds = 3600
    assert answer.status_code == 200, answer.text
    exp = idp.issued_exp[-1]
    cookie = next(c for c in answer.headers.get_list("set-cookie") if "ledger_console=" in c)
    max_age = int(re.search(r"Max-Age=(\d+)", cookie).group(1))  # type: ignore[union-attr]
    assert max_age == exp - int(clock.now().timestamp()) and max_age < 900
    clock.moment = clock.now().fromtimestamp(exp - 1, clock.now().tzinfo)
    assert opens_console(browser)
    clock.advance(1)  # the token's exp: the session ends with it
    assert not opens_console(browser)


def test_starting_sign_ins_is_rate_limited_per_address(
    browser: TestClient, settings: Settings, clock: FixedClock
) -> None:
    allowed = settings.console_oidc_starts_per_minute
    answers = [browser.get("/console/oidc/start", follow_redirects=False) for _ in range(allowed)]
    assert [a.status_code for a in answers] == [303] * allowed
    for _ in range(3):  # past the limit: one answer, whatever is asked
        over = browser.get("/console/oidc/start", follow_redirects=False)
        assert over.status_code == 429 and TOO_MANY in over.text
        assert over.headers["Retry-After"] == "6" and "ledger_console_oidc=" not in str(
            over.headers.get_list("set-cookie")
        )
    clock.advance(6)  # one start's worth of the minute refilled
    assert browser.get("/console/oidc/start", follow_redirects=False).status_code == 303
    assert browser.get("/console/oidc/start", follow_redirects=False).status_code == 429


def test_a_tampered_state_is_refused_and_the_code_stays_unredeemed(
    browser: TestClient, idp: OidcProvider
) -> None:
    callback = to_provider(browser, "alice")
    state = parse_qs(urlsplit(callback).query)["state"][0]
    code = parse_qs(urlsplit(callback).query)["code"][0]
    tampered = callback.replace(state, ("0" if state[0] != "0" else "1") + state[1:])
    answer = browser.get(tampered, follow_redirects=False)
    assert answer.status_code == 401 and REFUSED in answer.text
    assert session_cookie(answer) is None and code not in idp.redeemed
    assert not opens_console(browser)
    overlong = browser.get(f"/console/oidc/callback?state={'a' * 5000}&code=x")
    assert overlong.status_code == 401 and REFUSED in overlong.text


def test_a_replayed_code_is_refused(browser: TestClient, idp: OidcProvider) -> None:
    first = to_provider(browser, "alice")
    assert browser.get(first).status_code == 200
    browser.cookies.clear()
    assert browser.get(first, follow_redirects=False).status_code == 401  # the same callback
    # the old code with a fresh sign-in's state: the provider refuses it (used, other verifier)
    fresh = to_provider(browser, "bob")
    old_code = parse_qs(urlsplit(first).query)["code"][0]
    new_code = parse_qs(urlsplit(fresh).query)["code"][0]
    answer = browser.get(fresh.replace(new_code, old_code), follow_redirects=False)
    assert answer.status_code == 401 and REFUSED in answer.text
    assert session_cookie(answer) is None
    assert not opens_console(browser)


def test_the_rate_limit_keeps_a_bounded_table_of_addresses() -> None:
    limit = RateLimit(2, window=60.0, max_addresses=3)
    now = FixedClock().now()
    assert [limit.allow("a", now) for _ in range(3)] == [True, True, False]
    for address in ("b", "c", "d"):  # "a" is the least recently seen: forgotten
        assert limit.allow(address, now)
    assert len(limit) == 3
    assert limit.allow("a", now)  # a fresh bucket, as after a quiet minute
    later = now + timedelta(seconds=30)  # a bucket never holds more than its capacity
    assert [limit.allow("b", later) for _ in range(3)] == [True, True, False]
    earlier = now - timedelta(seconds=60)  # a clock set back refills nothing
    assert [limit.allow("d", earlier) for _ in range(2)] == [True, False]


def test_the_readme_configuration_loads_and_derives_the_redirect_url() -> None:
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = re.search(r"<!-- console-oidc:start -->\s*```sh\n(.*?)```", text, re.S)
    assert block, "README console-oidc markers not found"
    script = block.group(1).replace('"$CLIENT_SECRET"', "s3cret")
    values = dict(re.findall(r"LEDGER_([A-Z_]+)=(\S+)", script))
    assert "ledger serve" in script and "CONSOLE_OIDC_ISSUER" in values
    loaded = load_settings(store="memory", **{k.lower(): v for k, v in values.items()})
    assert loaded.console_oidc_redirect_url == "https://ledger.example.com/console/oidc/callback"
    assert loaded.secure_cookies and "s3cret" not in repr(loaded)


def test_the_issuer_needs_a_client_id_and_the_public_url() -> None:
    with pytest.raises(SettingsError, match="LEDGER_CONSOLE_OIDC_CLIENT_ID"):
        load_settings(store="memory", console_oidc_issuer="https://idp.example.com")
    with pytest.raises(SettingsError, match="LEDGER_PUBLIC_URL"):
        load_settings(
            store="memory",
            console_oidc_issuer="https://idp.example.com",
            console_oidc_client_id="c",
        )
    with pytest.raises(SettingsError, match="production needs https"):
        load_settings(
            store="memory",
            env="production",
            auth_hs256_secret="s" * 40,
            public_url="https://ledger.example.com",
            console_oidc_issuer="http://idp.example.com",
            console_oidc_client_id="c",
        )


# -- client authentication at the token endpoint -------------------------------

METHODS = ["client_secret_basic", "client_secret_post", "private_key_jwt", "none"]
KID = "ledger-console-1"
README = Path(__file__).resolve().parents[2] / "README.md"


@dataclass(frozen=True)
class ClientKey:
    path: Path
    public: dict[str, Any]
    """The public JWK, with its kid, as registered at the provider."""


def _pem(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def _client_key(path: Path, key: Any, kid: str) -> ClientKey:
    from cryptography.hazmat.primitives.asymmetric import rsa
    from joserfc.jwk import import_key

    path.write_bytes(_pem(key))
    kind = "RSA" if isinstance(key, rsa.RSAPrivateKey) else "EC"
    public = import_key(path.read_bytes(), kind, {"kid": kid}).as_dict(private=False)
    return ClientKey(path, public)


@pytest.fixture(scope="module")
def rsa_key(tmp_path_factory: pytest.TempPathFactory) -> ClientKey:
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return _client_key(tmp_path_factory.mktemp("oidc-key") / "console-oidc.pem", key, KID)


@contextlib.contextmanager
def accepting(
    idp: OidcProvider, method: str, public_keys: list[dict[str, Any]] | None = None
) -> Iterator[None]:
    """The provider's client takes ``method`` only, for the block."""
    before = idp.client.auth_method, idp.client.public_keys
    idp.client.auth_method, idp.client.public_keys = method, public_keys or []
    try:
        yield
    finally:
        idp.client.auth_method, idp.client.public_keys = before


def client_auth_settings(
    idp: OidcProvider, method: str, key: ClientKey | None, kid: str = KID, **more: Any
) -> Settings:
    credentials: dict[str, Any] = {}
    if method in ("client_secret_basic", "client_secret_post"):
        credentials = {"console_oidc_client_secret": idp.client.client_secret}
    elif method == "private_key_jwt" and key is not None:
        credentials = {
            "console_oidc_private_key_file": str(key.path),
            "console_oidc_private_key_id": kid,
        }
    return load_settings(
        store="memory",
        env="test",
        public_url=PUBLIC_URL,
        console_oidc_issuer=idp.issuer,
        console_oidc_client_id=idp.client.client_id,
        console_oidc_scope="openid profile groups",
        console_oidc_token_endpoint_auth_method=method,
        **credentials,
        **more,
    )


def sign_in_as_alice(settings: Settings, idp: OidcProvider) -> tuple[httpx.Response, str, bool]:
    """The callback's answer, the code it carried, and whether a console page opens."""
    with TestClient(create_app(settings), base_url=PUBLIC_URL) as browser:
        callback = to_provider(browser, "alice")
        code = parse_qs(urlsplit(callback).query)["code"][0]
        answer = browser.get(callback, follow_redirects=False)
        return answer, code, opens_console(browser)


# each method accepted when sent, and refused once when another is registered:
# (registered, sent) around the cycle, so every method is also the wrong one once
PAIRS = [(m, m) for m in METHODS] + list(zip(METHODS, METHODS[1:] + METHODS[:1], strict=True))


@pytest.mark.parametrize(("accepted", "sent"), PAIRS)
def test_the_token_endpoint_takes_the_configured_method_and_refuses_another(
    idp: OidcProvider,
    rsa_key: ClientKey,
    sent: str,
    accepted: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = client_auth_settings(idp, sent, rsa_key)
    assert settings.console_oidc_token_auth_method == sent
    authenticated = len(idp.authenticated)
    with accepting(idp, accepted, [rsa_key.public]):
        answer, code, opened = sign_in_as_alice(settings, idp)
    if sent == accepted:
        assert answer.status_code == 200, answer.text
        assert session_cookie(answer) is not None and opened
        assert idp.authenticated[authenticated:] == [sent]
        if sent == "private_key_jwt":
            header, claims = idp.assertion_headers[-1], idp.assertion_claims[-1]
            assert (header["kid"], header["alg"]) == (KID, "RS256")
            assert claims["iss"] == claims["sub"] == idp.client.client_id
            assert claims["aud"] == idp.issuer + "/token"
            assert 0 < claims["exp"] - claims["iat"] <= 60  # good for one exchange
    else:
        assert answer.status_code == 401 and REFUSED in answer.text
        assert session_cookie(answer) is None and not opened
        assert len(idp.authenticated) == authenticated and code not in idp.redeemed
        assert "code exchange failed" in caplog.text
    assert idp.client.client_secret not in caplog.text and "PRIVATE KEY" not in caplog.text


def test_an_ec_key_signs_es256_and_an_unknown_kid_is_refused(
    idp: OidcProvider, tmp_path: Path
) -> None:
    from cryptography.hazmat.primitives.asymmetric import ec

    key = _client_key(tmp_path / "ec.pem", ec.generate_private_key(ec.SECP256R1()), "ec-1")
    with accepting(idp, "private_key_jwt", [key.public]):
        answer, _, opened = sign_in_as_alice(
            client_auth_settings(idp, "private_key_jwt", key, kid="ec-1"), idp
        )
        assert answer.status_code == 200 and opened, answer.text
        header = idp.assertion_headers[-1]
        assert (header["kid"], header["alg"]) == ("ec-1", "ES256")
        # the same key under a kid the provider does not know: no key verifies it
        answer, code, opened = sign_in_as_alice(
            client_auth_settings(idp, "private_key_jwt", key, kid="ec-2"), idp
        )
        assert answer.status_code == 401 and not opened and code not in idp.redeemed


def test_the_readme_key_and_settings_sign_an_admin_in_with_private_key_jwt(
    idp: OidcProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from joserfc.jwk import import_key

    text = README.read_text()
    blocks = {
        name: re.search(rf"<!-- {name}:start -->\s*```sh\n(.*?)```", text, re.S)
        for name in ("console-oidc-key", "console-oidc-private-key-jwt")
    }
    assert all(blocks.values()), "README console-oidc-key markers not found"
    key_script = blocks["console-oidc-key"].group(1)  # type: ignore[union-attr]
    subprocess.run(["bash", "-euo", "pipefail", "-c", key_script], cwd=tmp_path, check=True)
    script = blocks["console-oidc-private-key-jwt"].group(1)  # type: ignore[union-attr]
    values = {k.lower(): v for k, v in re.findall(r"LEDGER_([A-Z_]+)=(\S+)", script)}
    assert "ledger serve" in script and values["console_oidc_token_endpoint_auth_method"] == (
        "private_key_jwt"
    )
    kid = values["console_oidc_private_key_id"]
    public = import_key((tmp_path / "console-oidc.pub.pem").read_bytes(), "EC", {"kid": kid})
    # the README's settings with this provider's coordinates, its relative key file
    # read from where the ledger starts
    monkeypatch.chdir(tmp_path)
    settings = load_settings(
        store="memory",
        env="test",
        **{
            **values,
            "public_url": PUBLIC_URL,
            "console_oidc_issuer": idp.issuer,
            "console_oidc_client_id": idp.client.client_id,
            "console_oidc_scope": "openid profile groups",
        },
    )
    with accepting(idp, "private_key_jwt", [public.as_dict(private=False)]):
        answer, _, opened = sign_in_as_alice(settings, idp)
    assert answer.status_code == 200 and opened, answer.text
    assert (idp.assertion_headers[-1]["kid"], idp.assertion_headers[-1]["alg"]) == (kid, "ES256")


SECRET = "s3cret-of-the-client"


@pytest.mark.parametrize(
    ("given", "fragment"),
    [
        (
            {"console_oidc_token_endpoint_auth_method": "client_secret_basic"},
            "METHOD=client_secret_basic needs LEDGER_CONSOLE_OIDC_CLIENT_SECRET",
        ),
        (
            {"console_oidc_token_endpoint_auth_method": "client_secret_post"},
            "METHOD=client_secret_post needs LEDGER_CONSOLE_OIDC_CLIENT_SECRET",
        ),
        (
            {
                "console_oidc_token_endpoint_auth_method": "none",
                "console_oidc_client_secret": SECRET,
            },
            "METHOD=none sends no client secret: unset LEDGER_CONSOLE_OIDC_CLIENT_SECRET",
        ),
        (
            {
                "console_oidc_token_endpoint_auth_method": "private_key_jwt",
                "console_oidc_client_secret": SECRET,
                "console_oidc_private_key_file": "console-oidc.pem",
                "console_oidc_private_key_id": KID,
            },
            "METHOD=private_key_jwt sends no client secret",
        ),
        (
            {
                "console_oidc_token_endpoint_auth_method": "private_key_jwt",
                "console_oidc_private_key_file": "console-oidc.pem",
            },
            "METHOD=private_key_jwt needs LEDGER_CONSOLE_OIDC_PRIVATE_KEY_FILE and "
            "LEDGER_CONSOLE_OIDC_PRIVATE_KEY_ID",
        ),
        (
            {"console_oidc_private_key_id": KID},
            "METHOD (unset: private_key_jwt) needs LEDGER_CONSOLE_OIDC_PRIVATE_KEY_FILE",
        ),
        (
            {
                "console_oidc_client_secret": SECRET,
                "console_oidc_private_key_file": "console-oidc.pem",
                "console_oidc_private_key_id": KID,
            },
            "are for LEDGER_CONSOLE_OIDC_TOKEN_ENDPOINT_AUTH_METHOD=private_key_jwt, "
            "not client_secret_basic",
        ),
        (
            {"console_oidc_token_endpoint_auth_method": "client_secret_jwt"},
            "LEDGER_CONSOLE_OIDC_TOKEN_ENDPOINT_AUTH_METHOD: Input should be",
        ),
    ],
)
def test_a_token_endpoint_auth_that_cannot_work_is_refused_in_one_line(
    given: dict[str, str], fragment: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings(
            store="memory",
            public_url=PUBLIC_URL,
            console_oidc_issuer="https://idp.example.com",
            console_oidc_client_id="ledger-console",
            **given,
        )
    message = str(caught.value)
    assert fragment in message and "\n" not in message and SECRET not in message


def _unusable_keys(tmp_path: Path) -> dict[str, bytes | None]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    encrypted = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"passphrase"),
    )
    return {
        "missing": None,
        "not a key": b"not a key",
        "encrypted": encrypted,
        "rsa 1024": _pem(rsa.generate_private_key(public_exponent=65537, key_size=1024)),
        "p-384": _pem(ec.generate_private_key(ec.SECP384R1())),
        "ed25519": _pem(ed25519.Ed25519PrivateKey.generate()),
    }


def test_a_client_key_that_does_not_load_stops_start_up_in_one_line(
    idp: OidcProvider, tmp_path: Path
) -> None:
    for name, content in _unusable_keys(tmp_path).items():
        path = tmp_path / f"{name}.pem"
        if content is not None:
            path.write_bytes(content)
        settings = client_auth_settings(idp, "private_key_jwt", ClientKey(path, {}))
        with pytest.raises(SettingsError) as caught:
            create_app(settings)
        message = str(caught.value)
        assert message.startswith("invalid settings: LEDGER_CONSOLE_OIDC_PRIVATE_KEY_FILE: "), name
        assert "\n" not in message and "BEGIN" not in message, (name, message)

    result = CliRunner().invoke(
        cli,
        ["serve", "--no-worker"],
        env={
            "LEDGER_STORE": "memory",
            "LEDGER_PUBLIC_URL": PUBLIC_URL,
            "LEDGER_CONSOLE_OIDC_ISSUER": idp.issuer,
            "LEDGER_CONSOLE_OIDC_CLIENT_ID": "ledger-console",
            "LEDGER_CONSOLE_OIDC_TOKEN_ENDPOINT_AUTH_METHOD": "private_key_jwt",
            "LEDGER_CONSOLE_OIDC_PRIVATE_KEY_FILE": str(tmp_path / "not a key.pem"),
            "LEDGER_CONSOLE_OIDC_PRIVATE_KEY_ID": KID,
        },
        prog_name="ledger",
    )
    assert_one_line_failure(
        result, "LEDGER_CONSOLE_OIDC_PRIVATE_KEY_FILE", "not an unencrypted PEM private key"
    )
