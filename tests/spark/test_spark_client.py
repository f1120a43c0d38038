"""``jetstream_sync.spark.client``: one cached connection per process, fork-aware."""

from __future__ import annotations

import multiprocessing
import os

import pytest

from jetstream_sync.spark import client

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


def test_udfs_share_one_connection_per_worker_process(spark, shared_server):
    """A UDF over 8 partitions sees one connection (server client id) per Python worker."""
    from pyspark.sql import functions as F

    url = shared_server.url

    def who(_: int) -> str:
        return f"{os.getpid()}:{client(url).server_info['client_id']}"

    rows = spark.range(0, 64, numPartitions=8).select(
        F.udf(who, "string", useArrow=False)("id").alias("w")
    )
    seen = {tuple(map(int, row.w.split(":"))) for row in rows.collect()}
    per_pid: dict[int, set[int]] = {}
    for pid, conn in seen:
        per_pid.setdefault(pid, set()).add(conn)
    assert all(len(conns) == 1 for conns in per_pid.values()), per_pid
    ids = [next(iter(conns)) for conns in per_pid.values()]
    assert len(set(ids)) == len(ids)  # no two processes share a connection
    assert len(per_pid) <= 8


def test_the_same_options_give_the_same_client_and_others_another(shared_server):
    """Calls with the same options share a client; other options get their own."""
    first = client(shared_server.url)
    assert client(shared_server.url) is first
    named = client(shared_server.url, name="other")
    assert named is not first and client(shared_server.url, name="other") is named


def _child(url: str, parent_client_id: int, out) -> None:
    conn = client(url)
    out.put((conn.server_info["client_id"] != parent_client_id, conn.rtt(timeout=5) > 0))


def test_a_forked_child_gets_its_own_connection(shared_server):
    """A child forked after client() connects again; the parent's client keeps working."""
    parent = client(shared_server.url)
    context = multiprocessing.get_context("fork")
    out = context.SimpleQueue()
    child = context.Process(
        target=_child, args=(shared_server.url, parent.server_info["client_id"], out)
    )
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert out.get() == (True, True)
    assert client(shared_server.url) is parent and parent.rtt(timeout=5) > 0
