"""Error messages join the error and its causes, saying each cause once, and
name options as this package's keyword arguments, never as the CLI's flags."""

from __future__ import annotations

import errno
import os
import pytest

import bcd
from helpers import FIXTURES


def test_a_missing_source_names_the_path_and_the_os_error_once(tmp_path):
    for name in ["missing.tar", "missing-no-extension"]:
        missing = str(tmp_path / name)
        with pytest.raises(FileNotFoundError) as raised:
            bcd.ingest([missing], tmp_path / "d")
        message = str(raised.value)
        assert message.count(missing) == 1, message
        assert message.count(os.strerror(errno.ENOENT)) == 1, message
        assert not (tmp_path / "d").exists()
        # The operating system's error alone is the exception's __cause__.
        cause = raised.value.__cause__
        assert isinstance(cause, FileNotFoundError), repr(cause)
        assert cause.errno == errno.ENOENT and missing not in str(cause)


def test_options_in_messages_are_keyword_arguments(tmp_path):
    source = [FIXTURES / "tar" / "webdataset.tar"]
    bcd.ingest(source, tmp_path / "d")
    for options, says in [
        ({"keyless": True}, "keyless= applies only when creating one"),
        ({"max_shard_size": 4096}, "max_shard_size= applies only when creating a dataset"),
        ({}, "use on_duplicate= skip to keep the first"),
    ]:
        with pytest.raises(ValueError) as raised:
            bcd.ingest(source, tmp_path / "d", **options)
        message = str(raised.value)
        assert says in message, message
        assert "--" not in message and "`" not in message, message
    bcd.Dataset.create(tmp_path / "plain", keyed=True, compression=None)
    with pytest.raises(ValueError) as raised:
        bcd.ingest(source, tmp_path / "plain", compression="lz4")
    assert "compression= applies only when creating a dataset" in str(raised.value)
