"""The Django tutorial is complete: its app's files, taken from docs/tutorials/django.md
(the blocks that begin ``# shop/NAME.py``), make a project that works as the tutorial
says, in a fresh ``startproject`` with a durq_worker beside it.

It runs on this interpreter's Django 5.2 with django-tasks, so the tasks module takes
the import the tutorial gives for it; tests/contrib/django/test_projects.py covers both
Django versions with the test app.
"""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path

from contrib.django.projects import SETTINGS, Project, django52_env

ROOT = Path(__file__).resolve().parents[3]
_FILE = re.compile(r"^```python\n# (shop/\w+\.py)\n(.*?)^```", re.MULTILINE | re.DOTALL)

DRIVE = """
import json, os, time
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proj.settings")
import django
django.setup()
from django.test import Client
from shop.models import Order

client = Client()
result_id = client.post("/shop/orders/", {"item": "lamp"}).json()["result_id"]
deadline = time.monotonic() + 60
while True:
    status = client.get(f"/shop/orders/{result_id}/").json()["status"]
    if status in ("SUCCESSFUL", "FAILED") or time.monotonic() > deadline:
        break
    time.sleep(0.1)
print(json.dumps({"status": status, "order": Order.objects.get().status}))
"""


def test_the_tutorials_shop_app_runs_as_written(tmp_path: Path, redis_url: str) -> None:
    env = django52_env()
    files = dict(_FILE.findall((ROOT / "docs" / "tutorials" / "django.md").read_text()))
    assert set(files) == {"shop/models.py", "shop/tasks.py", "shop/views.py", "shop/urls.py"}
    env.run("-m", "django", "startproject", "proj", ".", cwd=tmp_path)
    env.run("manage.py", "startapp", "shop", cwd=tmp_path)
    for name, code in files.items():
        if name == "shop/tasks.py":  # "Django 5.2: from django_tasks import task"
            code = code.replace("from django.tasks import task", "from django_tasks import task")
        (tmp_path / name).write_text(code)
    settings = tmp_path / "proj" / "settings.py"
    namespace = f"tutorial-{secrets.token_hex(4)}"
    settings.write_text(settings.read_text() + SETTINGS.format(url=redis_url, namespace=namespace))
    urls = tmp_path / "proj" / "urls.py"  # as the tutorial says
    text = urls.read_text().replace("import path", "import include, path")
    urls.write_text(text + "\nurlpatterns.append(path('shop/', include('shop.urls')))\n")
    env.run("manage.py", "makemigrations", "shop", "-v", "0", cwd=tmp_path)
    env.run("manage.py", "migrate", "-v", "0", cwd=tmp_path)
    project = Project(env, tmp_path)
    project.start_worker()
    try:
        out = env.run("-c", DRIVE, cwd=tmp_path, timeout=120)
    finally:
        project.stop_worker()
    found = json.loads(out.strip().splitlines()[-1])
    assert found == {"status": "SUCCESSFUL", "order": "fulfilled"}, project.worker_log()
