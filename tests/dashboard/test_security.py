"""The dashboard's guards over plain HTTP: tokens, CSRF, Origin, Host, headers."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable

import httpx
import pytest
from starlette.datastructures import Headers

import durq
from dashboard.support import LiveServer
from durq.dashboard.security import csrf_ok, new_csrf_token, origin_ok, token_matches
from durq.dev.server import free_port

Serve = Callable[..., LiveServer]
TOKEN = "correct-horse-battery"


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_token_matches_bearer_and_basic_only_with_the_token() -> None:
    assert token_matches(f"Bearer {TOKEN}", TOKEN)
    assert token_matches(f"bearer {TOKEN}", TOKEN)
    assert token_matches(_basic("anyone", TOKEN), TOKEN)
    assert token_matches(_basic("", TOKEN), TOKEN)
    assert not token_matches(None, TOKEN)
    assert not token_matches("", TOKEN)
    assert not token_matches(f"Bearer {TOKEN}x", TOKEN)
    assert not token_matches(_basic(TOKEN, "wrong"), TOKEN)
    assert not token_matches("Basic !!!not-base64", TOKEN)
    assert not token_matches("Basic " + base64.b64encode(TOKEN.encode()).decode(), TOKEN)
    assert not token_matches(f"Token {TOKEN}", TOKEN)


def test_csrf_tokens_need_the_matching_cookie_and_a_valid_signature() -> None:
    secret, other = b"a" * 32, b"b" * 32
    token = new_csrf_token(secret)
    assert csrf_ok(secret, token, token)
    assert not csrf_ok(secret, token, new_csrf_token(secret))  # another page's token
    assert not csrf_ok(other, token, token)  # signed by another app
    assert not csrf_ok(secret, None, token)
    assert not csrf_ok(secret, token, None)
    forged = token.split(".")[0] + ".AAAA"
    assert not csrf_ok(secret, forged, forged)
    assert not csrf_ok(secret, "nonce-only", "nonce-only")


@pytest.mark.parametrize(
    ("headers", "ok"),
    [
        ({"host": "dash:8080"}, True),
        ({"host": "dash:8080", "origin": "http://dash:8080"}, True),
        ({"host": "dash:8080", "origin": "https://dash:8080"}, True),  # TLS at a proxy
        ({"host": "dash:8080", "origin": "https://evil.example"}, False),
        ({"host": "dash:8080", "origin": "null"}, False),
        ({"host": "dash:8080", "referer": "http://dash:8080/queue/dead?q=a"}, True),
        ({"host": "dash:8080", "referer": "http://evil.example/x"}, False),
    ],
)
def test_origin_check(headers: dict[str, str], ok: bool) -> None:
    assert origin_ok(Headers(headers)) is ok


def _dead_letter(url: str, queue_name: str) -> str:
    with durq.Queue(queue_name, url) as queue:
        queue.enqueue({"n": 1})
        job = queue.dequeue()
        assert job is not None
        queue.requeue(job, reason="boom", dead=True)
        return job.id


def _csrf_from(page: httpx.Response) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found is not None
    return found.group(1)


def test_actions_need_post_a_csrf_token_and_a_same_site_origin(
    redis_url: str, queue_name: str, serve: Serve
) -> None:
    job_id = _dead_letter(redis_url, queue_name)
    dash = serve(redis_url)
    with httpx.Client(base_url=dash.url) as client:
        page = client.get(f"/queue/dead?q={queue_name}")
        assert page.status_code == 200
        cookie = client.cookies["durq_csrf"]
        token = _csrf_from(page)
        assert token == cookie
        assert "httponly" in page.headers["set-cookie"].lower()
        assert "samesite=strict" in page.headers["set-cookie"].lower()
        form = {"q": queue_name, "id": job_id}

        assert client.get(f"/queue/dead/replay?q={queue_name}&id={job_id}").status_code == 405
        assert client.post("/queue/dead/replay", data=form).status_code == 403
        assert client.post("/queue/dead/replay", data={**form, "csrf": "x.y"}).status_code == 403
        forged = new_csrf_token(b"not the app's secret")
        client.cookies.set("durq_csrf", forged)
        refused = client.post("/queue/dead/replay", data={**form, "csrf": forged})
        assert refused.status_code == 403
        client.cookies.set("durq_csrf", cookie)
        cross_site = client.post(
            "/queue/dead/replay",
            data={**form, "csrf": token},
            headers={"origin": "https://evil.example"},
        )
        assert cross_site.status_code == 403
        as_json = client.post("/queue/dead/replay", json={**form, "csrf": token})
        assert as_json.status_code == 415
        with durq.Queue(queue_name, redis_url) as queue:
            assert queue.stats().dead == 1  # nothing above changed anything

        done = client.post("/queue/dead/replay", data={**form, "csrf": token})
        assert done.status_code == 303
        assert done.headers["location"].endswith(f"/queue/dead?q={queue_name}&done=replayed&n=1")
    with durq.Queue(queue_name, redis_url) as queue:
        assert queue.stats().dead == 0
        assert queue.stats().pending == 1


def test_a_token_guards_every_route_including_metrics_and_static(
    redis_url: str, serve: Serve
) -> None:
    dash = serve(redis_url, token=TOKEN)
    for path in ("/", "/workers", "/metrics", "/api/overview", "/static/durq.css"):
        anonymous = httpx.get(dash.url + path)
        assert anonymous.status_code == 401, path
        assert TOKEN not in anonymous.text
        assert (
            httpx.get(dash.url + path, headers={"authorization": "Bearer nope"}).status_code == 401
        )
        bearer = httpx.get(dash.url + path, headers={"authorization": f"Bearer {TOKEN}"})
        assert bearer.status_code == 200, path
        basic = httpx.get(dash.url + path, auth=("prometheus", TOKEN))
        assert basic.status_code == 200, path


def test_allowed_hosts_refuse_other_host_headers(redis_url: str, serve: Serve) -> None:
    dash = serve(redis_url, allowed_hosts=["127.0.0.1", "localhost"])
    assert httpx.get(dash.url + "/").status_code == 200
    assert httpx.get(dash.url + "/", headers={"host": f"localhost:{dash.port}"}).status_code == 200
    rebound = httpx.get(dash.url + "/", headers={"host": "attacker.example"})
    assert rebound.status_code == 400


def test_pages_carry_protective_headers(redis_url: str, serve: Serve) -> None:
    dash = serve(redis_url)
    page = httpx.get(dash.url + "/")
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp
    assert "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["cache-control"] == "no-store"


def test_unknown_or_invalid_queues_and_jobs_are_errors_not_crashes(
    redis_url: str, queue_name: str, serve: Serve
) -> None:
    job_id = _dead_letter(redis_url, queue_name)
    dash = serve(redis_url)
    cases = {
        f"/queue?q={queue_name}": 200,
        "/queue?q=no-such-queue-here": 404,
        "/queue?q=": 400,
        "/queue?q=%3Cbad%20name%3E": 400,
        f"/queue/job?q={queue_name}&id={job_id}": 200,
        f"/queue/job?q={queue_name}&id=never-was": 404,
        f"/queue/job?q={queue_name}&id=": 400,
        f"/queue/dead?q={queue_name}&offset=-5&limit=abc": 200,
        f"/queue/dead?q={queue_name}&offset=99999999": 200,
        f"/queue?q={queue_name}&groups=100000&group=%00": 200,
    }
    for path, status in cases.items():
        assert httpx.get(dash.url + path).status_code == status, path


def test_an_unreachable_redis_gives_an_error_page(serve: Serve) -> None:
    dash = serve(f"redis://:{'pw-not-shown'}@127.0.0.1:{free_port()}/0")
    for path in ("/", "/workers", "/metrics", "/queue?q=emails"):
        page = httpx.get(dash.url + path)
        assert page.status_code == 503, path
        assert "did not answer" in page.text
        assert "pw-not-shown" not in page.text


def _replay_through(first: LiveServer, second: LiveServer, queue_name: str, job_id: str) -> int:
    """The status of a replay POSTed to ``second`` with the form and cookie ``first``
    rendered: what a browser does when a load balancer sends its two requests to two
    processes of one dashboard."""
    with httpx.Client() as client:
        page = client.get(f"{first.url}/queue/dead?q={queue_name}")
        form = {"q": queue_name, "id": job_id, "csrf": _csrf_from(page)}
        cookies = {"durq_csrf": client.cookies["durq_csrf"]}
        posted = httpx.post(f"{second.url}/queue/dead/replay", data=form, cookies=cookies)
        return posted.status_code


def test_processes_of_one_dashboard_accept_each_others_forms_when_they_share_a_secret(
    redis_url: str, queue_name: str, serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = _dead_letter(redis_url, queue_name)
    # two apps stand for two processes: each has its own state, as after a fork
    alone = serve(redis_url), serve(redis_url)
    assert _replay_through(*alone, queue_name, job_id) == 403  # random secrets differ
    shared = "s" * 16
    assert _replay_through(serve(redis_url, secret=shared), serve(redis_url, secret=shared),
                           queue_name, job_id) == 303  # fmt: skip
    _dead_again(redis_url, queue_name)
    # from the environment (what gunicorn -w N workers share), or derived from the token
    monkeypatch.setenv("DURQ_DASHBOARD_SECRET", "e" * 16)
    assert _replay_through(serve(redis_url), serve(redis_url), queue_name, job_id) == 303
    monkeypatch.delenv("DURQ_DASHBOARD_SECRET")
    _dead_again(redis_url, queue_name)
    with_token = serve(redis_url, token=TOKEN), serve(redis_url, token=TOKEN)
    auth = {"authorization": f"Bearer {TOKEN}"}
    with httpx.Client(headers=auth) as client:
        page = client.get(f"{with_token[0].url}/queue/dead?q={queue_name}")
        form = {"q": queue_name, "id": job_id, "csrf": _csrf_from(page)}
        posted = httpx.post(f"{with_token[1].url}/queue/dead/replay", data=form, headers=auth,
                            cookies={"durq_csrf": client.cookies["durq_csrf"]})  # fmt: skip
    assert posted.status_code == 303
    with pytest.raises(durq.InvalidArgument, match="at least 16"):
        serve(redis_url, secret="short")


def _dead_again(url: str, queue_name: str) -> None:
    """Dead-letter again the one job a replay put back."""
    with durq.Queue(queue_name, url) as queue:
        job = queue.dequeue()
        assert job is not None
        queue.requeue(job, reason="boom", dead=True)
