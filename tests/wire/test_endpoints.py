"""The wire endpoints as one registry of `Endpoint` records: every endpoint a module declares is
registered once, and the tap's path check, the readers' dispatch and the providers' own hosts are
the registry's, nothing written beside it."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import af_otel.wire
from af_otel.wire import endpoints, hosts, read
from af_otel.wire.endpoint import Endpoint


def _declared() -> list[Endpoint]:
    found: list[Endpoint] = []
    for info in pkgutil.iter_modules(af_otel.wire.__path__):
        module = importlib.import_module(f"af_otel.wire.{info.name}")
        one = getattr(module, "ENDPOINT", None)
        if isinstance(one, Endpoint):
            found.append(one)
        some = getattr(module, "ENDPOINTS", ())
        if some is not endpoints.ENDPOINTS:  # the registry itself, or a module reading it
            found += [e for e in some if isinstance(e, Endpoint)]
    return found


def test_every_declared_endpoint_is_registered_once() -> None:
    """A module's `Endpoint` not in the registry would never be tapped: each is there, once."""
    declared = _declared()
    assert sorted(e.name for e in declared) == sorted(e.name for e in endpoints.ENDPOINTS)
    assert len(endpoints.BY_NAME) == len(endpoints.ENDPOINTS)


@pytest.mark.parametrize("endpoint", endpoints.ENDPOINTS, ids=lambda e: e.name)
def test_each_ending_names_its_endpoint(endpoint: Endpoint) -> None:
    """Every ending, under any prefix and with a query, names its endpoint; an ending that needs
    more of the path (Bedrock's ``/model/``) names nothing without it."""
    for ending in endpoint.endings:
        path = endpoint.within + b"x" + ending
        assert endpoints.endpoint_of(b"/v1/anything" + path) == endpoint.name
        assert endpoints.endpoint_of(path + b"?alt=sse") == endpoint.name
        assert endpoints.endpoint_of(path + b"/more") is None
        if endpoint.within:
            assert endpoints.endpoint_of(b"/v1/x" + ending) is None


def test_the_dispatch_is_the_registry() -> None:
    """Each endpoint is read by exactly one of the two dispatches, the one its record names."""
    for endpoint in endpoints.ENDPOINTS:
        assert (endpoint.name in read.READERS) != (endpoint.name in read.PATH_READERS)
        assert (endpoint.name in endpoints.PATH_MODEL) == endpoint.path_model
        assert read.READERS.get(endpoint.name) is endpoint.reader
        assert read.PATH_READERS.get(endpoint.name) is endpoint.read_path
    assert set(hosts.PATTERNS) == {p for e in endpoints.ENDPOINTS for p in e.hosts}


def test_an_endpoint_holds_one_reader() -> None:
    """A record with both readers, or none, is refused where it is declared."""
    with pytest.raises(ValueError, match="one of reader and read_path"):
        Endpoint("toy", (b"/toy",), "toy")
