"""The ``jetstream`` and ``jetstream-kv`` data sources refuse an option they do not take.

A misspelt option used to be ignored (``startSeqq=15`` read the whole
stream). Each role (batch read, streaming read, batch write, streaming
write, and the Key-Value reads and writes) takes the options it declares in
``jetstream_sync/spark/_options.py``; anything else fails when the query is
planned, before any task runs, naming the option and the closest one the
role does take.
"""

from __future__ import annotations

import re

import pytest

from jetstream_sync.spark._options import (
    BATCH_READ,
    COUNTER_STREAM_WRITE,
    ROLES,
    STREAM_READ,
    STREAM_WRITE,
    Options,
    UnknownOptionError,
)
from tests.fixtures.spark import REPO_ROOT

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


@pytest.fixture
def stream_options():
    """Streams answer direct gets (the fast read path)."""
    return {"allow_direct": True}


def _fill(js, name: str, n: int) -> None:
    for i in range(1, n + 1):
        js.publish_async(f"{name}.x", b"m%d" % i)
    js.publish_async_completed(10)


def _reader(spark, server, stream: str, **options):
    reader = spark.read.format("jetstream").option("servers", server.url).option("stream", stream)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader


def _refused(caught: pytest.ExceptionInfo, option: str, suggestion: str | None) -> str:
    """The error's text, after checking it names the option (Spark lowercases option names)."""
    text = str(caught.value)
    assert "UnknownOptionError" in text and f"option {option.lower()!r}" in text, text
    if suggestion is not None:
        assert f"did you mean {suggestion!r}?" in text, text
    return text


@pytest.mark.parametrize(
    ("option", "value", "suggestion"),
    [
        ("startSeqq", "15", "startSeq"),
        ("subjct", "full.0", "subject"),
        ("failOnDataLos", "false", "failOnDataLoss"),
        ("pasword", "secret", "password"),
    ],
)
def test_a_misspelt_batch_read_option_is_refused_before_anything_is_read(
    spark, shared_server, js, stream, option, value, suggestion
):
    """The issue's misspellings: each is refused, with the option meant."""
    _fill(js, stream.name, 20)
    df = _reader(spark, shared_server, stream.name, **{option: value}).load()
    with pytest.raises(Exception) as caught:
        df.collect()
    text = _refused(caught, option, suggestion)
    assert 'a batch read of format("jetstream")' in text and "password" in text, text
    assert "secret" not in text  # the value is not repeated (it may be a credential)


def test_a_batch_read_option_on_a_streaming_read_says_where_it_belongs(
    spark, shared_server, js, stream, tmp_path
):
    """startSeq bounds batch reads only: a streaming read refuses it (it used to ignore it)."""
    _fill(js, stream.name, 5)
    query = (
        spark.readStream.format("jetstream")
        .option("servers", shared_server.url)
        .option("stream", stream.name)
        .option("startSeq", "3")
        .load()
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
    )
    with pytest.raises(Exception) as caught:
        started = query.start()
        started.awaitTermination(120)
        raise AssertionError(f"the query ran: {started.exception()}")
    text = _refused(caught, "startSeq", None)
    assert 'a streaming read of format("jetstream")' in text, text
    assert "is an option of a batch read" in text, text
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*.parquet"))


def test_a_misspelt_write_option_is_refused_before_any_row_is_published(
    spark, shared_server, stream
):
    """A batch write with ``writeID`` spelt ``writId``: refused, nothing stored."""
    df = spark.createDataFrame([("a",), ("b",)], "data STRING")
    writer = (
        df.write.format("jetstream")
        .mode("append")
        .option("servers", shared_server.url)
        .option("subject", f"{stream.name}.w")
        .option("writId", "job-1")
    )
    with pytest.raises(Exception) as caught:
        writer.save()
    _refused(caught, "writId", "writeId")
    assert stream.info().state.messages == 0


def test_a_streaming_write_takes_sparks_own_options_and_refuses_a_misspelt_one(
    spark, shared_server, js, stream, tmp_path
):
    """checkpointLocation and queryName (Spark passes them to the sink) are accepted; a
    misspelt ``subjet`` is refused, and nothing is published."""
    _fill(js, stream.name, 5)
    sink = js.create_stream(name=stream.name + "OUT", subjects=[f"{stream.name}OUT.>"])
    try:
        query = (
            spark.readStream.format("jetstream")
            .option("servers", shared_server.url)
            .option("stream", stream.name)
            .option("startingOffsets", "earliest")
            .load()
            .select("data")
            .writeStream.format("jetstream")
            .queryName(f"q{stream.name.lower()}")
            .option("servers", shared_server.url)
            .option("subjet", f"{sink.name}.out")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
        )
        with pytest.raises(Exception) as caught:
            started = query.start()
            started.awaitTermination(120)
            raise AssertionError(f"the query ran: {started.exception()}")
        _refused(caught, "subjet", "subject")
        assert sink.info().state.messages == 0
    finally:
        js.delete_stream(sink.name)


def test_the_kv_source_refuses_a_misspelt_option_on_read_and_write(spark, shared_server, js):
    """``jetstream-kv``: ``bukcet`` on a read, ``keys`` (a read option) on a write."""
    read = spark.read.format("jetstream-kv").option("servers", shared_server.url)
    with pytest.raises(Exception) as caught:
        read.option("bukcet", "b").load().collect()
    _refused(caught, "bukcet", "bucket")
    df = spark.createDataFrame([("k", "v")], "key STRING, value STRING")
    write = df.write.format("jetstream-kv").mode("append").option("servers", shared_server.url)
    with pytest.raises(Exception) as caught:
        write.option("bucket", "b").option("keys", ">").save()
    text = _refused(caught, "keys", None)
    assert 'is an option of a batch read of format("jetstream-kv")' in text, text


def test_a_path_is_refused_not_ignored(spark, shared_server, stream):
    """``load("NAME")`` gives Spark's ``path`` option: refused, saying to set options instead."""
    with pytest.raises(Exception) as caught:
        spark.read.format("jetstream").option("servers", shared_server.url).load(
            stream.name
        ).collect()
    assert "takes no path" in str(caught.value), caught.value


# --------------------------------------------------------------------------
# Without Spark: the declarations themselves.


def test_every_option_of_every_role_is_in_the_docs_table():
    """docs/spark.md's option tables name every option a role takes (Spark's own aside)."""
    text = (REPO_ROOT / "docs" / "spark.md").read_text()
    documented = {
        name.lower()
        for line in text.splitlines()
        if line.startswith("| `")
        for name in re.findall(r"`([A-Za-z.]+)`", line.split("|")[1])
    }
    missing = {
        (role.what, option)
        for role in ROLES
        for option in role.options
        if option.lower() not in documented
    }
    assert missing == set(), sorted(missing)


def test_spark_streaming_sink_options_are_taken_only_by_the_streaming_write():
    """checkpointLocation and queryName come from Spark's writeStream; no other role takes
    them, and no role takes a path."""
    sinks = (STREAM_WRITE, COUNTER_STREAM_WRITE)
    assert all(r.takes("checkpointLocation") and r.takes("queryName") for r in sinks)
    assert not any(r.takes("checkpointLocation") for r in ROLES if r not in sinks)
    assert not any(r.takes("path") or r.takes("paths") for r in ROLES)


def test_names_match_ignoring_case_and_underscores():
    """start_seq, STARTSEQ and startSeq are one option."""
    for spelling in ("start_seq", "STARTSEQ", "startSeq"):
        assert (
            Options({"servers": "nats://h:4222", spelling: "3"}, BATCH_READ).integer("startSeq")
            == 3
        )
    with pytest.raises(UnknownOptionError, match="'start_seqq'.*did you mean 'startSeq'"):
        Options({"start_seqq": "3"}, BATCH_READ)


@pytest.mark.parametrize(
    ("option", "value", "named"),
    [
        ("connect_timeout", "soon", "connectTimeout"),
        ("TLSHANDSHAKEFIRST", "maybe", "tlsHandshakeFirst"),
        ("tls", "2", "tls"),
    ],
)
def test_a_bad_connection_option_is_named_as_the_docs_spell_it(option, value, named):
    """Spark lowercases option names; the error still says ``connectTimeout``."""
    opts = Options({"servers": "nats://h:4222", option: value}, BATCH_READ)
    with pytest.raises(ValueError, match=f"option '{named}' must be .*{value!r}"):
        opts.connect_kwargs()


def test_reading_an_option_the_role_does_not_declare_is_a_bug_caught_at_once():
    """Code reading an undeclared option fails loudly instead of reading nothing."""
    opts = Options({"servers": "nats://h:4222"}, STREAM_READ)
    with pytest.raises(KeyError, match="startSeq"):
        opts.get("startSeq")


def test_test_hooks_are_not_options_of_the_user_facing_source():
    """The fault tests' hooks (tests/fixtures/spark_faults.py) are refused by every role."""
    for role in ROLES:
        for hook in ("pauseDir", "pauseAfterBatches", "failAfterRows", "testPauseDir"):
            assert not role.takes(hook), (role.what, hook)
