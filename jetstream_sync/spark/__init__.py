"""PySpark integration: the ``jetstream``, ``jetstream-kv`` and ``jetstream-counter`` data
sources, and ``client()``.

Install with the ``spark`` extra (``pyspark>=4.0``, ``pyarrow`` and the
Spark Connect client's packages)::

    import jetstream_sync.spark as jss

    jss.register(spark)
    df = (spark.read.format("jetstream")
          .option("servers", "nats://127.0.0.1:4222").option("stream", "ORDERS").load())

Importing this package imports neither pyspark nor pyarrow, connects nothing
and starts no thread. See ``docs/spark.md``.

The reads go through :meth:`Stream.read_arrow`; this package adds only Spark
things (partitions, options, schema, pushed-down filters). It imports the
package's public modules and, of each lower room, at most this one internal
seam (``tests/test_layering.py`` keeps the list):

- the client core: ``jetstream_sync._seam`` (``redact_url``, so no option
  error quotes a password; ``parse_rfc3339`` for the time options;
  ``is_filter_subject`` and ``is_publish_subject`` for subject checks).

It imports nothing of the protocol core: its writes go through
:meth:`JetStreamContext.publish_arrow`.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from ._client import client

__all__ = ["client", "register"]

_REQUIRED = ("pyspark", "pyarrow")
_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
_PARALLELISM_CONF = "spark.default.parallelism"
#: Partitions of a read without ``numPartitions`` when the session cannot say.
_FALLBACK_PARALLELISM = 2


def _check_installed() -> None:
    for package in _REQUIRED:
        if importlib.util.find_spec(package) is None:
            raise ImportError(
                f"jetstream_sync.spark needs the {package!r} package, which is not installed: "
                "pip install 'jetstream_sync[spark]' (without pyarrow Spark only reports "
                "'Python worker exited unexpectedly')"
            )


def _plans_scoped_per_scan(spark: Any) -> bool:
    """Whether this Spark keeps a pushed-down read plan to its own scan.

    Spark 4.3 stores the plan made by filter push-down on the data source
    object a DataFrame shares with every later query on it: after
    ``df.where("seq > 5").count()``, ``df.count()`` reuses the filtered plan
    and returns 5 rows too. Those versions have
    ``PythonDataSourceV2.setReadInfo``; later ones do not.
    """
    if _is_connect(spark):  # no JVM class to inspect: stay safe
        return False
    try:
        cls = spark._jvm.java.lang.Class.forName(
            "org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2"
        )
        return not any(m.getName() == "setReadInfo" for m in cls.getDeclaredMethods())
    except Exception:  # a JVM without the class: stay safe
        return False


def _is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (no ``sparkContext``, no JVM)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _default_parallelism(spark: Any) -> int:
    """Partitions of a read without ``numPartitions``.

    A classic session asks its ``SparkContext``. A Spark Connect session has
    none, so it reads ``spark.default.parallelism`` from the session's
    configuration, and falls back to 2 when that is not set.
    """
    if not _is_connect(spark):
        return max(1, int(spark.sparkContext.defaultParallelism))
    configured = spark.conf.get(_PARALLELISM_CONF, None)
    if configured is None:
        return _FALLBACK_PARALLELISM
    return max(1, int(configured))


def register(spark: Any, pushdown: bool | None = None) -> None:
    """Register ``format("jetstream")``, ``"jetstream-kv"`` and ``"jetstream-counter"`` with Spark.

    Executors need ``jetstream_sync`` importable, like any Python dependency.
    Works on a classic session and on a Spark Connect one
    (``SparkSession.builder.remote(...)``); there, the partitions of a read
    without ``numPartitions`` come from ``spark.default.parallelism``, or
    are 2 when the server does not set it.

    Args:
        spark: the ``SparkSession``.
        pushdown: push ``where`` clauses on ``seq``, ``subject`` and
            ``timestamp`` down to JetStream (this also sets
            ``spark.sql.python.filterPushdown.enabled``). The default turns it
            on where Spark keeps each pushed-down plan to its own query; on
            Spark 4.3 it stays off, because there a DataFrame reused after a
            filtered query silently reads with that query's filters (see
            ``docs/spark/reading.md``, "``where`` clauses"). The ``subject``,
            ``startSeq``, ``endSeq`` and ``startTime`` options narrow a read
            either way.

    Raises:
        ImportError: pyspark or pyarrow is missing (the message names it).
    """
    _check_installed()
    from ._counter_sink import JetStreamCounterDataSource
    from ._kv import JetStreamKVDataSource
    from ._source import JetStreamDataSource

    if pushdown is None:
        pushdown = _plans_scoped_per_scan(spark)
    if pushdown:
        spark.conf.set(_PUSHDOWN_CONF, "true")
    parallelism = _default_parallelism(spark)
    for base in (JetStreamDataSource, JetStreamKVDataSource, JetStreamCounterDataSource):
        # A subclass made here carries these settings to the Python workers
        # (it is pickled by value).
        configured = type(
            base.__name__ + "Registered",
            (base,),
            {
                "default_partitions": parallelism,
                "pushdown": bool(pushdown),
                "__module__": base.__module__,
            },
        )
        spark.dataSource.register(configured)
