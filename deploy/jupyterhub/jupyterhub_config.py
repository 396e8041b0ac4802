"""JupyterHub 6.1.1 for a class of this course on one machine: the configuration tests/test_classroom_hub.py runs.

Start it with ``jupyterhub -f deploy/jupyterhub/jupyterhub_config.py`` after ``make hub-proxy`` (the proxy,
from npm). Everything an instructor changes is an environment variable, so the test and a real class use
this same file (docs/instructor-guide.md, "A class on JupyterHub"):

==========================  ===========================================================================
``B2L_HUB_AUTHENTICATOR``   ``shared-password`` (default: one password for all students, another for the
                            instructor; any student can log in as any other, so for a test or a demo only),
                            ``pam`` (each user's own OS password), or an import string such as
                            ``oauthenticator.GenericOAuthenticator`` (configure it in a file of your own)
``B2L_HUB_PASSWORD``        with ``shared-password``: the students' password (8 characters or more); required
``B2L_HUB_ADMIN_PASSWORD``  with ``shared-password``: the instructor's (32 characters or more); required
``B2L_HUB_INSTRUCTOR``      the instructor's user name, a Hub admin (default ``instructor``)
``B2L_HUB_STUDENTS``        the students' user names, comma-separated; nobody else can log in; required
``B2L_HUB_IP``              the address users connect to (default ``127.0.0.1``, loopback only)
``B2L_HUB_PORT``            its port (default 8000)
``B2L_HUB_API_PORT``        the Hub's own API port, on 127.0.0.1 (default 8081)
``B2L_HUB_PROXY_API_PORT``  the proxy's control port, on 127.0.0.1 (default 8001)
``B2L_HUB_STATE``           folder for the Hub's sqlite database, cookie secret and pid files (default:
                            the current folder)
``B2L_HUB_SPAWNER``         ``simple`` (default: every user is this OS user, one home each under
                            ``B2L_HUB_HOMES``; for a test only), ``localprocess`` (one OS user per user,
                            which must exist; the Hub runs as root), or an import string such as
                            ``systemdspawner.SystemdSpawner``; a container spawner (DockerSpawner,
                            KubeSpawner) also needs the Hub and the servers off loopback (``hub_bind_url``,
                            ``Spawner.ip``), which this file keeps on 127.0.0.1
``B2L_HUB_HOMES``           with ``simple``: the folder that holds one home per user (default ``/tmp``)
``B2L_EXCHANGE_ROOT``       nbgrader's exchange root as the single-user servers see it (default
                            ``/srv/nbgrader/exchange``); it must exist and be writable by all users
``B2L_COURSE_ID``           the nbgrader course id (default ``bytes2logits``)
``B2L_CHECK_SERVICE_PORT``  when set, the Hub also runs the self-check service ``b2l-check`` on this port
``B2L_COURSE_ROOT``         the instructor's course folder, which the check service grades against
                            (default: this repository)
==========================  ===========================================================================

The single-user servers find the exchange through ``deploy/jupyterhub/single-user/nbgrader_config.py``
(named by ``JUPYTER_CONFIG_PATH``), which reads ``B2L_EXCHANGE_ROOT`` and ``B2L_COURSE_ID``.
"""

import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

c = get_config()  # noqa: F821 - provided by JupyterHub when it loads this file


def _env(name: str, default: str | None = None) -> str:
    value = os.environ.get(name, default)
    if value is None or value == "":
        raise SystemExit(f"{__file__}: set the environment variable {name} (see the table at the top of this file)")
    return value


def _port(name: str, default: int) -> int:
    text = os.environ.get(name, str(default))
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise SystemExit(f"{__file__}: {name}={text!r} is not a TCP port (1 to 65535)")
    return int(text)


# ---- network: users reach the proxy; the Hub, the proxy's API and the servers stay on loopback
ip = os.environ.get("B2L_HUB_IP", "127.0.0.1")
c.JupyterHub.bind_url = f"http://{ip}:{_port('B2L_HUB_PORT', 8000)}"
c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{_port('B2L_HUB_API_PORT', 8081)}"
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{_port('B2L_HUB_PROXY_API_PORT', 8001)}"
c.Spawner.ip = "127.0.0.1"

# The proxy: the copy `make hub-proxy` installs from deploy/jupyterhub/package-lock.json, else one on PATH.
local_proxy = HERE / "node_modules" / ".bin" / "configurable-http-proxy"
if local_proxy.exists():
    c.ConfigurableHTTPProxy.command = [str(local_proxy)]
elif not shutil.which("configurable-http-proxy"):
    raise SystemExit(f"{__file__}: configurable-http-proxy is not installed: run `make hub-proxy` "
                     "(npm ci --prefix deploy/jupyterhub) or `npm install -g configurable-http-proxy@5.3.0`")

# ---- the Hub's own state
state = Path(os.environ.get("B2L_HUB_STATE", os.getcwd())).resolve()
state.mkdir(parents=True, exist_ok=True)
c.JupyterHub.db_url = "sqlite:///" + str(state / "jupyterhub.sqlite")
c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(state / "jupyterhub.pid")
c.ConfigurableHTTPProxy.pid_file = str(state / "jupyterhub-proxy.pid")
# Stopping the Hub stops the proxy and every single-user server it started.
c.JupyterHub.cleanup_servers = True
c.JupyterHub.cleanup_proxy = True

# ---- who can log in: the instructor (admin) and the listed students, each with a shared password
instructor = os.environ.get("B2L_HUB_INSTRUCTOR", "instructor")
students = {s.strip() for s in _env("B2L_HUB_STUDENTS").split(",") if s.strip()}
if instructor in students:
    raise SystemExit(f"{__file__}: B2L_HUB_INSTRUCTOR={instructor!r} is also listed in B2L_HUB_STUDENTS")
authenticator = os.environ.get("B2L_HUB_AUTHENTICATOR", "shared-password")
c.JupyterHub.authenticator_class = authenticator
if authenticator == "shared-password":
    c.SharedPasswordAuthenticator.user_password = _env("B2L_HUB_PASSWORD")
    c.SharedPasswordAuthenticator.admin_password = _env("B2L_HUB_ADMIN_PASSWORD")
c.Authenticator.allowed_users = students | {instructor}
c.Authenticator.admin_users = {instructor}

# ---- the single-user servers
spawner = os.environ.get("B2L_HUB_SPAWNER", "simple")
c.JupyterHub.spawner_class = spawner
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 60
c.Spawner.http_timeout = 60
if spawner in ("simple", "localprocess"):
    # On this machine the servers run from the Hub's own environment, where the course package is installed.
    singleuser = Path(sys.executable).with_name("jupyterhub-singleuser")
    if singleuser.exists():
        c.Spawner.cmd = [str(singleuser)]
if spawner == "simple":
    c.SimpleLocalProcessSpawner.home_dir_template = os.path.join(os.environ.get("B2L_HUB_HOMES", "/tmp"),
                                                                 "{username}")
    if os.getuid() == 0:  # a test in a container: Jupyter refuses root without this
        c.Spawner.args = ["--ServerApp.allow_root=True"]


def _student_id(spawner) -> str:
    """The nbgrader student id of a simple spawner's user (they all share one OS account; see below)."""
    return "" if spawner.user.admin else spawner.user.name


c.Spawner.environment = {
    "B2L_EXCHANGE_ROOT": os.environ.get("B2L_EXCHANGE_ROOT", "/srv/nbgrader/exchange"),
    "B2L_COURSE_ID": os.environ.get("B2L_COURSE_ID", "bytes2logits"),
    # Where nbgrader (the Assignments tab, and the nbgrader commands in a terminal) finds the exchange.
    "JUPYTER_CONFIG_PATH": str(HERE / "single-user"),
}
if spawner == "simple":
    # nbgrader names a submission after the OS user; here every user is the same OS user, so the student id
    # is the Hub's user name instead. With one OS user per student (localprocess, systemd) nbgrader finds the
    # right name itself, and so it does as the container user `jovyan` (docker, kubernetes), for which nbgrader
    # reads $JUPYTERHUB_USER; this is not set then.
    c.Spawner.environment["B2L_NBGRADER_STUDENT_ID"] = _student_id

# ---- the self-check service (python -m bytes2logits check-service), behind the Hub's authentication
check_port = os.environ.get("B2L_CHECK_SERVICE_PORT")
if check_port:
    check_port = str(_port("B2L_CHECK_SERVICE_PORT", 0))
    course_root = os.environ.get("B2L_COURSE_ROOT", str(REPO))
    c.JupyterHub.services = [{
        "name": "b2l-check",
        "url": f"http://127.0.0.1:{check_port}",
        "command": [sys.executable, "-m", "bytes2logits", "check-service", "--port", check_port,
                    "--root", course_root],
        "cwd": course_root,
        "environment": {"B2L_COURSE_ROOT": course_root},
    }]
    c.JupyterHub.load_roles = [
        # Every user may call the service with their own token; it learns who they are from the Hub.
        {"name": "user", "scopes": ["self", "access:services!service=b2l-check"]},
    ]
    # The token in a student's server ($JUPYTERHUB_API_TOKEN, which `bytes2logits check --service` sends)
    # carries only these scopes: without the service's, every check is refused with 403.
    c.Spawner.server_token_scopes = ["users:activity!user", "access:servers!server",
                                     "access:services!service=b2l-check"]
    # The servers reach the service through the proxy, at the address it listens on (loopback for 0.0.0.0).
    proxy_ip = "127.0.0.1" if ip in ("", "0.0.0.0", "::") else ip
    hub_url = f"http://{proxy_ip}:{_port('B2L_HUB_PORT', 8000)}"
    c.Spawner.environment["BYTES2LOGITS_CHECK_SERVICE"] = f"{hub_url}/services/b2l-check/"
