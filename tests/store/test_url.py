"""open_store: argument, then AF_OTEL_STORE, then ./.af_otel/store; paths local, URLs to fsspec."""

from __future__ import annotations

from pathlib import Path

import pytest

from af_otel import names
from af_otel.errors import StoreError
from af_otel.store import FsspecStore, LocalStore, open_store


@pytest.fixture(autouse=True)
def no_store_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each test starts without AF_OTEL_STORE, in a working directory it owns."""
    monkeypatch.delenv(names.ENV_STORE, raising=False)
    monkeypatch.chdir(tmp_path)


class TestResolution:
    def test_default(self, tmp_path: Path) -> None:
        """With no argument and no variable the store is ./.af_otel/store, resolved now."""
        store = open_store()
        assert isinstance(store, LocalStore)
        assert store.root == tmp_path / ".af_otel" / "store"
        assert names.DEFAULT_STORE == "./.af_otel/store"

    def test_default_creates_nothing_until_a_put(self, tmp_path: Path) -> None:
        """Opening the default store leaves the working directory untouched."""
        store = open_store()
        assert list(tmp_path.iterdir()) == []
        store.put(b"x")
        assert (tmp_path / ".af_otel" / "store" / "sha256").is_dir()

    def test_environment(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        """AF_OTEL_STORE names the store when no argument does."""
        monkeypatch.setenv(names.ENV_STORE, str(tmp_path / "from-env"))
        store = open_store()
        assert isinstance(store, LocalStore)
        assert store.root == tmp_path / "from-env"

    def test_environment_url(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """AF_OTEL_STORE may be an fsspec URL."""
        monkeypatch.setenv(names.ENV_STORE, "memory://afotel-env")
        store = open_store()
        assert isinstance(store, FsspecStore)
        assert store.url == "memory://afotel-env"

    def test_argument_beats_environment(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        """An explicit argument wins over the variable."""
        monkeypatch.setenv(names.ENV_STORE, str(tmp_path / "from-env"))
        store = open_store(tmp_path / "from-arg")
        assert isinstance(store, LocalStore)
        assert store.root == tmp_path / "from-arg"

    def test_empty_environment_is_unset(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        """An empty AF_OTEL_STORE falls back to the default instead of the working directory."""
        monkeypatch.setenv(names.ENV_STORE, "")
        store = open_store()
        assert isinstance(store, LocalStore)
        assert store.root == tmp_path / ".af_otel" / "store"

    def test_relative_path_is_fixed_at_open(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        """A relative root is resolved when opened, so a later chdir does not move the store."""
        store = open_store("rel/store")
        (tmp_path / "elsewhere").mkdir()
        monkeypatch.chdir(tmp_path / "elsewhere")
        address = store.put(b"stays")
        assert (tmp_path / "rel" / "store" / "sha256" / address[7:9] / address[9:]).is_file()

    def test_home_is_expanded(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        """A leading ~ means the home directory, as it would in a shell."""
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        store = open_store("~/afstore")
        assert isinstance(store, LocalStore)
        assert store.root == tmp_path / "home" / "afstore"


class TestURLs:
    @pytest.mark.parametrize("prefix", ["file://", "file://localhost", "FILE://"])
    def test_file_urls_are_local(self, tmp_path: Path, prefix: str) -> None:
        """file:// URLs (empty host or localhost) open the embedded local store."""
        store = open_store(prefix + str(tmp_path / "a b"))
        assert isinstance(store, LocalStore)
        assert store.root == tmp_path / "a b"

    def test_percent_escapes_in_file_urls(self, tmp_path: Path) -> None:
        """A file URL's escapes are decoded, so the store's own url opens the same store."""
        first = open_store(tmp_path / "a b%")
        again = open_store(first.url)
        assert isinstance(again, LocalStore)
        assert again.root == tmp_path / "a b%"

    def test_file_url_with_a_host_is_refused(self) -> None:
        """file://host/path names another machine, which a local store cannot reach."""
        with pytest.raises(StoreError, match="names host"):
            open_store("file://relative/dir")

    @pytest.mark.parametrize(
        "url", ["memory://afotel-a", "memory://afotel-a/deeper", "simplecache::memory://afotel-a"]
    )
    def test_other_urls_go_to_fsspec(self, url: str) -> None:
        """Any other URL, chained ones included, opens an fsspec store."""
        store = open_store(url)
        assert isinstance(store, FsspecStore)
        assert store.url == url

    def test_plain_path_with_colon_is_local(self) -> None:
        """A path with a colon but no scheme separator (or a one-letter drive) stays a path."""
        assert isinstance(open_store("dir:name"), LocalStore)
        assert isinstance(open_store("C://data"), LocalStore)

    def test_empty_url_is_refused(self) -> None:
        """An explicit empty string is a mistake, not the working directory."""
        with pytest.raises(StoreError, match="empty store URL"):
            open_store("")
