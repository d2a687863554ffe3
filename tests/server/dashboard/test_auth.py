"""Login with a token: cookie flags, bad tokens, redirects, logout, cross-site posts."""

from server.dashboard.auth import COOKIE_NAME, safe_next


def test_pages_redirect_to_login_when_logged_out(client, seeded):
    r = client.get("/jobs?status=failed")
    assert r.status_code == 303
    assert r.headers["location"] == "/login?next=/jobs%3Fstatus%3Dfailed"
    assert client.get("/login").status_code == 200


def test_login_sets_an_httponly_samesite_cookie(client, seeded):
    r = client.post("/login", data={"token": seeded.tokens["alice"], "next": "/models"})
    assert r.status_code == 303 and r.headers["location"] == "/models"
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE_NAME}={seeded.tokens['alice']};")
    flags = {part.strip().lower() for part in cookie.split(";")}
    assert "httponly" in flags
    assert "samesite=strict" in flags
    assert "path=/" in flags
    assert "secure" not in flags  # plain http in the test; https sets it
    page = client.get("/models")
    assert page.status_code == 200 and "alice" in page.text


def test_login_over_https_marks_the_cookie_secure(dashboard_app, seeded):
    from fastapi.testclient import TestClient

    c = TestClient(dashboard_app, base_url="https://testserver", follow_redirects=False)
    r = c.post("/login", data={"token": seeded.tokens["alice"]})
    assert "secure" in {p.strip().lower() for p in r.headers["set-cookie"].split(";")}


def test_a_bad_token_is_refused_without_a_cookie(client, seeded):
    r = client.post("/login", data={"token": "tf_not-a-token"})
    assert r.status_code == 401
    assert "not valid" in r.text
    assert "set-cookie" not in r.headers
    client.cookies.set(COOKIE_NAME, "tf_forged")
    assert client.get("/").status_code == 303


def test_logout_clears_the_cookie(alice):
    r = alice.post("/logout")
    assert r.status_code == 303 and r.headers["location"] == "/login"
    assert r.headers["set-cookie"].startswith(f'{COOKIE_NAME}="";')
    alice.cookies.clear()
    assert alice.get("/").status_code == 303


def test_cross_site_posts_are_refused(client, seeded):
    r = client.post("/login", data={"token": seeded.tokens["alice"]}, headers={"Origin": "https://evil.example"})
    assert r.status_code == 403
    same = client.post("/login", data={"token": seeded.tokens["alice"]}, headers={"Origin": "http://testserver"})
    assert same.status_code == 303


def test_next_only_goes_to_local_paths():
    assert safe_next("/kernels/ab") == "/kernels/ab"
    for outside in ("https://evil.example/", "//evil.example/x", "/\\evil.example", "javascript:alert(1)", ""):
        assert safe_next(outside) == "/"
