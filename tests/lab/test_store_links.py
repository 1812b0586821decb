"""An engine's own store: the description's `server:` and `links:`, the server the lab
starts for a trial (a real process, here Python's http.server), and the store faults'
grammar."""

from __future__ import annotations

import pathlib
import socket
import types
import urllib.request

import pytest

from harness import errors
from harness.engines import commands
from harness.faults import spec
from harness.lab import proxy_ports, store_links

# The server is a real process (Python's http.server), started, killed and started again.
pytestmark = pytest.mark.processes

SERVER = {
    "command": ["{python}", "-m", "http.server", "--bind", "{host}", "{web}"],
    "ports": ["web"],
}
BASE = {
    "name": "store_engine",
    "migrate": ["true"],
    "worker": ["true"],
    "submit": ["true"],
    "status": ["true"],
}


def _description(**fields: object) -> commands.EngineDescription:
    return commands.EngineDescription.model_validate({**BASE, **fields})


def test_links_need_a_server_and_lead_to_a_port_it_names() -> None:
    link = {"web": {"env": "STORE_URL", "port": "web"}}
    with pytest.raises(ValueError, match="links need a server"):
        _description(links=link)
    with pytest.raises(ValueError, match="does not name"):
        _description(server=SERVER, links={"web": {"env": "STORE_URL", "port": "grpc"}})
    with pytest.raises(ValueError, match="lower-case"):
        _description(server={**SERVER, "ports": ["Web"]})
    assert _description(server=SERVER, links=link).links["web"].env == "STORE_URL"


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def test_the_server_is_ready_before_it_is_handed_over_restarts_and_stops(
    tmp_path: pathlib.Path,
) -> None:
    description = _description(
        server=SERVER,
        links={"web": {"env": "STORE_URL", "port": "web", "value": "http://{host}:{port}/"}},
    )
    # A trial's directory is named after its faults: `#` in it, where a URI stops.
    directory = tmp_path / "kill@world_tool.effect#2"
    server = store_links.StoreServer(description, cwd=str(tmp_path), directory=directory)
    (directory / "store" / "marker.db").write_text("")
    server.start()
    try:
        url = server.env()["STORE_URL"]
        assert url == f"http://127.0.0.1:{server.ports['web']}/"
        with urllib.request.urlopen(url, timeout=5) as answer:  # ready means it answers
            assert answer.status == 200
            # It runs in the trial's store/: relative names land there.
            assert b"marker.db" in answer.read()
        server.kill()
        assert not _accepts(server.ports["web"])
        server.start()  # the same port again, as server_restart's heal does
        assert _accepts(server.ports["web"])
        assert len(list((directory / store_links.SERVER_LOGS).glob("server-*.log"))) == 2
    finally:
        server.stop()
    assert not _accepts(server.ports["web"])


def test_a_server_that_exits_is_an_environment_problem(tmp_path: pathlib.Path) -> None:
    description = _description(
        server={"command": ["{python}", "-c", "raise SystemExit(3)"], "ports": ["web"]},
        links={"web": {"env": "STORE_URL", "port": "web"}},
    )
    server = store_links.StoreServer(description, cwd=str(tmp_path), directory=tmp_path)
    with pytest.raises(errors.EnvironmentProblem, match="exited before it was ready"):
        server.start()


def test_the_servers_ports_are_never_where_the_kernel_hands_ports_out(
    tmp_path: pathlib.Path,
) -> None:
    """In CI, Temporal's dev server asked the kernel for a free port for its worker service
    and was given the metrics port we had probed free for it: it panicked, the trial
    ERRORed. Ports from below the ephemeral range are never handed out by the kernel, and
    the book keeps them from our other servers and proxies until the server stops."""
    ephemeral = proxy_ports.below_ephemeral()
    book = proxy_ports.shared()
    assert ephemeral is not None and book is not None
    description = _description(server=SERVER, links={"web": {"env": "STORE_URL", "port": "web"}})
    servers = [
        store_links.StoreServer(description, cwd=str(tmp_path), directory=tmp_path / str(i))
        for i in range(3)
    ]
    ports = [server.ports["web"] for server in servers]
    assert all(port in ephemeral for port in ports) and len(set(ports)) == 3
    assert set(ports) <= set(book.held().values())
    servers[0].start()
    for server in servers:
        server.stop()
    assert not set(ports) & set(book.held().values())


def test_a_port_taken_between_the_probe_and_the_bind_moves_the_first_start(
    tmp_path: pathlib.Path,
) -> None:
    """The book finds a port free, someone else binds it before the server does: the
    server exits on EADDRINUSE, its first start goes on from fresh ports, and the book
    never offers the stranger's port again."""
    description = _description(server=SERVER, links={"web": {"env": "STORE_URL", "port": "web"}})
    server = store_links.StoreServer(description, cwd=str(tmp_path), directory=tmp_path)
    taken = server.ports["web"]
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as stranger:
        stranger.bind(("127.0.0.1", taken))
        server.start()
        try:
            assert server.ports["web"] != taken and _accepts(server.ports["web"])
            first = (tmp_path / store_links.SERVER_LOGS / "server-1.log").read_text()
            assert "Address already in use" in first
        finally:
            server.stop()
    book = proxy_ports.shared()
    assert book is not None and book.refuses(taken)


def test_a_server_never_ready_is_stopped_and_gives_its_ports_back(
    tmp_path: pathlib.Path,
) -> None:
    engine = types.SimpleNamespace(
        description=_description(
            server={
                **SERVER,
                "command": ["sleep", "60"],
                "ready": ["false"],
                "ready_timeout_s": 0.3,
            },
            links={"web": {"env": "STORE_URL", "port": "web"}},
        ),
        cwd=str(tmp_path),
    )
    book = proxy_ports.shared()
    assert book is not None
    before = dict(book.held())
    with pytest.raises(errors.EnvironmentProblem, match="not ready within"):
        store_links.for_trial(engine, None, tmp_path, prefix="t")
    assert book.held() == before
    log = next((tmp_path / store_links.SERVER_LOGS).glob("server-*.log")).read_text()
    assert "killed by SIGTERM" in log


def test_a_restart_keeps_its_ports_even_when_one_was_taken(
    tmp_path: pathlib.Path,
) -> None:
    """After the first start the workers' proxies lead to the server's ports: a restart
    that cannot bind them is an environment problem, never a quiet move elsewhere."""
    description = _description(server=SERVER, links={"web": {"env": "STORE_URL", "port": "web"}})
    server = store_links.StoreServer(description, cwd=str(tmp_path), directory=tmp_path)
    server.start()
    port = server.ports["web"]
    server.kill()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))
            with pytest.raises(errors.EnvironmentProblem, match="exited before it was ready"):
                server.start()
        assert server.ports == {"web": port}
    finally:
        server.stop()


def test_a_server_script_beside_the_description_is_found_from_its_data_directory(
    tmp_path: pathlib.Path,
) -> None:
    """The server runs in the trial's store/, so a script shipped beside the description
    is named through `{engine_dir}` (restate_front.py is such a script)."""
    engine = tmp_path / "engine"
    engine.mkdir()
    (engine / "store_server.py").write_text(
        "import http.server, sys\n"
        "http.server.test(HandlerClass=http.server.SimpleHTTPRequestHandler,"
        " port=int(sys.argv[1]), bind='127.0.0.1')\n"
    )
    description = _description(
        server={"command": ["{python}", "{engine_dir}/store_server.py", "{web}"], "ports": ["web"]},
        links={"web": {"env": "STORE_URL", "port": "web"}},
    )
    server = store_links.StoreServer(description, cwd=str(engine), directory=tmp_path / "trial")
    server.start()
    try:
        assert _accepts(server.ports["web"])
    finally:
        server.stop()
    with pytest.raises(ValueError, match="lower-case"):
        _description(server={**SERVER, "ports": ["engine_dir"]})


def test_store_faults_name_a_link_and_strike_like_link_faults() -> None:
    step = spec.parse("store_cut@world:tool.effect#2?link=temporal&reset_peer=true&heal_after_s=5")
    assert step.params == {"link": "temporal", "reset_peer": True, "heal_after_s": 5}
    assert spec.parse(step.label()) == step
    assert spec.STORE == {"store_cut", "store_response_lost", "server_restart"}
    with pytest.raises(errors.CrashcertError, match="link name"):
        spec.parse("store_cut@tool.started#1?link=Temporal")
    with pytest.raises(errors.CrashcertError, match="exclude each other"):
        spec.parse("store_cut@tool.started#1?reset_peer=true&latency_ms=50")
    with pytest.raises(errors.CrashcertError, match="reads only"):
        spec.parse("server_restart@tool.started#1?link=temporal")
    assert spec.parse("store_response_lost@world:tool.effect#1").action == "store_response_lost"
