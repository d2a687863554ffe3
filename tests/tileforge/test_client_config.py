"""Where the client finds its server and token: arguments, environment, the saved login."""

import stat

import pytest

from tileforge.config import config_path, resolve, save_config
from tileforge.errors import ClientError


@pytest.fixture(autouse=True)
def _clean(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("TILEFORGE_URL", raising=False)
    monkeypatch.delenv("TILEFORGE_TOKEN", raising=False)


def test_login_is_saved_for_its_owner_only(tmp_path):
    path = save_config("http://h:1", "tf_secret")
    assert path == tmp_path / "xdg" / "tileforge" / "config.json" == config_path()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.chmod(0o644)
    save_config("http://h:2", "tf_other")  # a file loosened by hand is tightened again
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert resolve() == resolve(None, None)
    assert (resolve().url, resolve().token) == ("http://h:2", "tf_other")


def test_home_config_without_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert config_path() == tmp_path / "home" / ".config" / "tileforge" / "config.json"


def test_arguments_then_environment_then_saved_login(monkeypatch):
    save_config("http://saved:1/", "tf_saved")
    assert (resolve().url, resolve().token) == ("http://saved:1", "tf_saved")
    monkeypatch.setenv("TILEFORGE_URL", "http://env:2")
    monkeypatch.setenv("TILEFORGE_TOKEN", "tf_env")
    assert (resolve().url, resolve().token) == ("http://env:2", "tf_env")
    assert (resolve("http://arg:3", "tf_arg").url, resolve("http://arg:3", "tf_arg").token) == \
        ("http://arg:3", "tf_arg")


def test_the_saved_token_goes_only_to_its_own_server():
    save_config("http://saved:1", "tf_saved")
    assert resolve("http://elsewhere:9").token is None
    assert resolve("http://saved:1").token == "tf_saved"


def test_missing_or_bad_urls_are_named():
    with pytest.raises(ClientError, match=r"no server URL.*tileforge login"):
        resolve()
    with pytest.raises(ClientError, match="must start with http"):
        resolve("ftp://x")
    config_path().parent.mkdir(parents=True)
    config_path().write_text("{not json")
    with pytest.raises(ClientError, match=r"cannot read .*config\.json"):
        resolve()
