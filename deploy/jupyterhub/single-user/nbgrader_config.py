"""nbgrader on a student's (or the instructor's) single-user server: where the exchange is, which course.

deploy/jupyterhub/jupyterhub_config.py points ``JUPYTER_CONFIG_PATH`` at this folder and sets the variables
below, so the Assignments tab and the nbgrader commands in a terminal (``nbgrader fetch_assignment``,
``submit``, ``fetch_feedback``) use the class's exchange. In a container image (DockerSpawner, Zero to
JupyterHub), copy this file to ``/etc/jupyter/nbgrader_config.py`` and set the same variables.
"""

import os

c = get_config()  # noqa: F821 - provided by nbgrader when it loads this file

c.Exchange.root = os.environ.get("B2L_EXCHANGE_ROOT", "/srv/nbgrader/exchange")
c.CourseDirectory.course_id = os.environ.get("B2L_COURSE_ID", "bytes2logits")
# Only with the test's simple spawner, where every user is one OS user (see jupyterhub_config.py).
if os.environ.get("B2L_NBGRADER_STUDENT_ID"):
    c.CourseDirectory.student_id = os.environ["B2L_NBGRADER_STUDENT_ID"]
