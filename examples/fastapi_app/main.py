"""The web application: ``uvicorn examples.fastapi_app.main:api``.

- the lifespan opens durq's clients at start-up and closes them (and the dashboard's)
  at shutdown;
- ``Depends(get_app)`` and ``Depends(queue("emails"))`` hand endpoints the App or a queue;
- the dashboard is mounted at ``/ops/durq`` behind the application's own HTTP basic
  auth (user ``staff``, password from ``$DASHBOARD_PASSWORD``).
"""

import os
import secrets
from typing import Annotated

from examples.fastapi_app.tasks import app as durq_app
from examples.fastapi_app.tasks import send_welcome
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.security import HTTPBasic
from pydantic import BaseModel

import durq
from durq.contrib.fastapi import dashboard, get_app, lifespan, queue

basic = HTTPBasic(realm="staff")
EmailQueue = Annotated[durq.AsyncQueue, Depends(queue("emails"))]


async def staff_only(request: Request) -> bool:
    """The application's own check, reused for the dashboard: HTTP basic auth."""
    credentials = await basic(request)  # raises 401 with WWW-Authenticate when absent
    assert credentials is not None  # auto_error: absent credentials never get here
    password = os.environ.get("DASHBOARD_PASSWORD", "")
    ok = bool(password) and secrets.compare_digest(credentials.password, password)
    if credentials.username != "staff" or not ok:
        raise HTTPException(401, "wrong credentials", {"WWW-Authenticate": "Basic"})
    return True


class Signup(BaseModel):
    email: str


def create_api(app: durq.App = durq_app) -> FastAPI:
    """The FastAPI application for the durq App ``app``."""
    api = FastAPI(lifespan=lifespan(app))
    api.mount("/ops/durq", dashboard(app, auth=staff_only))

    @api.post("/signup")
    async def signup(body: Signup) -> dict[str, str]:
        handle = await send_welcome.aenqueue(body.email)
        return {"job_id": handle.id}

    @api.get("/stats")
    async def stats(durq_app: Annotated[durq.App, Depends(get_app)]) -> dict[str, int]:
        """Jobs not yet finished, per queue of the app's tasks."""
        return {name: (await durq_app.aqueue(name).stats()).size for name in durq_app.queues}

    @api.get("/jobs/{job_id}")
    async def job(job_id: str, emails: EmailQueue) -> dict[str, object]:
        info = await emails.job(job_id)
        if info is None:
            raise HTTPException(404, "no such job")
        handle = send_welcome.handle(job_id)  # the handle of a stored id
        try:
            result = await handle.aresult(timeout=0)
        except TimeoutError:
            result = None
        return {"state": info.state.value, "result": result}

    return api


api = create_api()
