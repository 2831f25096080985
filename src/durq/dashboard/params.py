"""A page's query parameters, checked: the value, or the error page that says why not.

Every page that shows one queue, one job or one workflow reads ``?q=`` and ``?id=`` the
same way, so the checks and their messages live here once."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from durq.dashboard.state import Dashboard, render
from durq.errors import InvalidArgument
from durq.keys import check_job_id, check_queue_name

__all__ = ["corrupt_page", "error_page", "id_or_error", "queue_or_error"]


def error_page(request: Request, dash: Dashboard, status: int, message: str) -> Response:
    """The error page with HTTP ``status`` and ``message``."""
    return render(request, dash, "error.html", {"status": status, "message": message}, status)


def corrupt_page(request: Request, dash: Dashboard, name: str) -> Response:
    """The error page for a queue whose keys hold values durq did not write."""
    message = (
        f"Queue {name} has keys that something other than durq wrote; `durq doctor` names them."
    )
    return error_page(request, dash, 500, message)


async def queue_or_error(request: Request, dash: Dashboard) -> str | Response:
    """The queue named by ``?q=``, or the error page when it is not a known queue."""
    name = request.query_params.get("q", "")
    try:
        check_queue_name(name)
    except InvalidArgument:
        return error_page(request, dash, 400, "Not a valid queue name.")
    if not await dash.data.is_queue(name):
        return error_page(request, dash, 404, f"No queue named {name} in this namespace.")
    return name


def id_or_error(request: Request, dash: Dashboard, what: str) -> str | Response:
    """The job or workflow id of ``?id=`` (``what`` names which, for the message), or the
    error page when it is not a valid id."""
    value = request.query_params.get("id", "").strip()
    try:
        check_job_id(value)
    except InvalidArgument:
        return error_page(request, dash, 400, f"Not a valid {what} id.")
    return value
