"""The worker suite, run against the local cluster (see conftest.py): workers started
by the CLI with a ``redis+cluster://`` URL, in-process workers, retries, timeouts."""

from worker.test_bad_jobs import *  # noqa: F403
from worker.test_crash_recovery import *  # noqa: F403
from worker.test_enqueue_options import *  # noqa: F403
from worker.test_lifecycle import *  # noqa: F403
from worker.test_modes import *  # noqa: F403
from worker.test_registry import *  # noqa: F403
from worker.test_results import *  # noqa: F403
from worker.test_retries import *  # noqa: F403
from worker.test_shutdown import *  # noqa: F403
from worker.test_supervisor import *  # noqa: F403
from worker.test_timeouts import *  # noqa: F403
