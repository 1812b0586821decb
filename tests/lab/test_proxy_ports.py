"""A cut proxy keeps its port: no proxy made while it is cut may listen there.

Found in a certify at --jobs auto: a worker's model request sent during its model_cut reached
another trial's tools service, through the proxy that had been handed the cut proxy's port.
"""

from __future__ import annotations

import pathlib
import socket

import pytest

from harness import errors
from harness.lab import proxy, proxy_ports


def test_book_never_hands_out_a_held_port() -> None:
    book = proxy_ports.PortBook(range(20000, 20003), seed=1)
    ports = {book.take(name) for name in ("a", "b", "c")}
    assert ports == {20000, 20001, 20002}
    with pytest.raises(errors.EnvironmentProblem, match="no free proxy port"):
        book.take("d")
    port_of_b = book.held()["b"]
    book.release("b")
    assert book.take("d") == port_of_b


def test_book_skips_a_port_someone_else_listens_on() -> None:
    book = proxy_ports.PortBook(range(20000, 20002), seed=0)
    first = book.take("a")
    book.refused("a")
    assert book.take("b") != first
    with pytest.raises(errors.EnvironmentProblem):
        book.take("c")  # the refused port is never tried again


def test_range_lies_below_the_ephemeral_ports(tmp_path: pathlib.Path) -> None:
    ranges = tmp_path / "ip_local_port_range"
    ranges.write_text("32768\t60999\n")
    assert proxy_ports.below_ephemeral(ranges) == range(20768, 32768)
    ranges.write_text("1100 60999\n")
    assert proxy_ports.below_ephemeral(ranges) is None  # no room: the kernel chooses


def test_cut_proxy_keeps_its_port_from_proxies_made_meanwhile(
    private_toxiproxy: proxy.Toxiproxy,
) -> None:
    ephemeral = proxy_ports.below_ephemeral()
    assert ephemeral is not None
    cut = private_toxiproxy.create("cut", "127.0.0.1:9")
    cut.disable()  # Toxiproxy closes the listener: the port is free in the kernel's eyes
    made = [private_toxiproxy.create(f"later-{i}", "127.0.0.1:9") for i in range(40)]
    ports = {later.listen_port for later in made}
    assert cut.listen_port not in ports
    # The kernel's choice (port 0) would lie in the ephemeral range and could be this one.
    assert all(port in ephemeral for port in {*ports, cut.listen_port})
    with socket.socket() as probe:  # cut: refused, as a disabled proxy always was
        probe.settimeout(2)
        assert probe.connect_ex(("127.0.0.1", cut.listen_port)) != 0
    cut.enable()
    assert private_toxiproxy.get("cut").listen == cut.listen


def test_a_port_in_use_is_skipped(private_toxiproxy: proxy.Toxiproxy) -> None:
    book = private_toxiproxy.ports
    assert book is not None
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        # seed 1 starts at the first port of the range: the squatted one
        private_toxiproxy.ports = proxy_ports.PortBook(range(taken, taken + 2), seed=1)
        try:
            made = private_toxiproxy.create("beside", "127.0.0.1:9")
        finally:
            private_toxiproxy.ports = book
    assert made.listen_port == taken + 1
