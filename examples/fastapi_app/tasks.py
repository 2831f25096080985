"""The tasks, on a durq App that reads its Redis URL from ``$DURQ_URL``.

Run a worker for them with ``durq worker examples.fastapi_app.tasks:app``.
"""

import durq

app = durq.App()


@app.task(queue="emails", result=True, max_attempts=5)
async def send_welcome(email: str) -> str:
    # a real application would talk to its mail provider here; make it idempotent with
    # durq.current_job().id, since a job may run again after a worker is lost
    return f"welcome mail sent to {email}"
