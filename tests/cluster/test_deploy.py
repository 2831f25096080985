"""The deploy suite's holding area and ``durq deploy check``, run against the local
cluster (see conftest.py): every key of the holding area is in its queue's slot."""

from deploy.test_deploy_check import *  # noqa: F403
from deploy.test_holding import *  # noqa: F403
