"""Replay and purge of dead letters, cancel of jobs and workflows: POST only,
CSRF-checked, refused in read-only mode.

A form sends ``q`` (the queue), ``csrf``, and either ``id`` fields (the selected jobs)
or ``all=1`` (dead letters only). The answer is a 303 redirect back to the dead letters,
or for a cancel to the job's (the workflow's) page, which says what was done.
"""

from __future__ import annotations

from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from durq.dashboard.render import url_builder
from durq.dashboard.security import CSRF_COOKIE, CSRF_FIELD, csrf_ok, origin_ok
from durq.dashboard.state import dashboard_of
from durq.errors import InvalidArgument
from durq.keys import check_job_id, check_queue_name

__all__ = ["cancel", "cancel_workflow", "purge", "replay"]

MAX_FORM_BYTES = 1 << 20  # a form of a thousand long ids stays well below this
MAX_IDS = 1000


async def _form(request: Request) -> dict[str, list[str]] | Response:
    """The URL-encoded form of ``request`` (parsed here, so the dashboard needs no
    multipart parser), or the response refusing it."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        return PlainTextResponse("expected a form", status_code=415)
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return PlainTextResponse("form too large", status_code=413)
    return parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)


async def _checked(request: Request) -> tuple[str, list[str], bool] | Response:
    """The queue, ids and ``all`` flag of an action's form, or the response refusing it."""
    dash = dashboard_of(request)
    if dash.config.read_only:
        return PlainTextResponse("this dashboard is read-only", status_code=403)
    if not origin_ok(request.headers):
        return PlainTextResponse("cross-site request refused", status_code=403)
    form = await _form(request)
    if isinstance(form, Response):
        return form
    field = (form.get(CSRF_FIELD) or [""])[0]
    if not csrf_ok(dash.secret, request.cookies.get(CSRF_COOKIE), field):
        return PlainTextResponse(
            "missing or invalid CSRF token: reload the page and try again", status_code=403
        )
    queue = (form.get("q") or [""])[0]
    ids = form.get("id", [])
    everything = (form.get("all") or [""])[0] == "1"
    try:
        check_queue_name(queue)
        if len(ids) > MAX_IDS:
            raise InvalidArgument(f"at most {MAX_IDS} jobs at once")
        for job_id in ids:
            check_job_id(job_id)
    except InvalidArgument as exc:
        return PlainTextResponse(f"bad request: {exc}", status_code=400)
    return queue, ids, everything


async def _act(request: Request, verb: str) -> Response:
    checked = await _checked(request)
    if isinstance(checked, Response):
        return checked
    queue, ids, everything = checked
    dash = dashboard_of(request)
    if not everything and not ids:
        count = 0  # nothing selected: nothing to do
    elif verb == "replayed":
        count = await dash.data.replay(queue, None if everything else ids)
    else:
        count = await dash.data.purge(queue, None if everything else ids)
    root = str(request.scope.get("root_path", "")).rstrip("/")
    target = url_builder(root)("/queue/dead", q=queue, done=verb, n=count)
    return RedirectResponse(target, status_code=303)


async def replay(request: Request) -> Response:
    """Replay the selected dead letters, or all of them, with fresh attempts."""
    return await _act(request, "replayed")


async def purge(request: Request) -> Response:
    """Delete the selected dead letters, or all of them, for good."""
    return await _act(request, "purged")


async def cancel(request: Request) -> Response:
    """Cancel the job (``id``): the answer redirects to its page, which says what the
    cancel did (cancelled, being stopped, or ended already)."""
    checked = await _one_id(request, "job")
    if isinstance(checked, Response):
        return checked
    queue, job_id = checked
    (result,) = await dashboard_of(request).data.cancel(queue, [job_id])
    return _back_to(request, "/queue/job", queue, job_id, result.status.value)


async def cancel_workflow(request: Request) -> Response:
    """Cancel the workflow (``id``) whose home is queue ``q``: it ends ``cancelled``, its
    steps that did not start never do and its running ones are stopped. The answer
    redirects to its page, which says what the cancel did."""
    checked = await _one_id(request, "workflow")
    if isinstance(checked, Response):
        return checked
    queue, workflow_id = checked
    status = await dashboard_of(request).data.cancel_workflow(queue, workflow_id)
    return _back_to(request, "/queue/workflow", queue, workflow_id, status)


async def _one_id(request: Request, what: str) -> tuple[str, str] | Response:
    """The queue and the one ``what`` id of a cancel's form, or the response refusing it."""
    checked = await _checked(request)
    if isinstance(checked, Response):
        return checked
    queue, ids, _everything = checked
    if len(ids) != 1:
        return PlainTextResponse(f"bad request: cancel one {what} id", status_code=400)
    return queue, ids[0]


def _back_to(request: Request, page: str, queue: str, item: str, done: str) -> Response:
    """The 303 back to the job's or workflow's ``page``, saying what was ``done``."""
    root = str(request.scope.get("root_path", "")).rstrip("/")
    return RedirectResponse(url_builder(root)(page, q=queue, id=item, done=done), status_code=303)
